"""`aotx serve --http-workers N` (N > 1): the main process's part.

The main process keeps NATS, the shared runtime, the engine and the stored surfaces' state. It serves
the full app (as `aotx serve` with one process does) on a private loopback port, the target of what
the workers forward (api.worker_proxy); it serves the engine to the workers over NATS
(aotx.engine_service) and the shared runtime through its NATS RPC (aotx.runtime.rpc). The N workers
(ops.http_workers) listen on the public host:port. The ready line is printed once all of them listen.
SIGTERM/SIGINT: the workers drain and stop first (each as `aotx serve` drains), then the main process.
SIGHUP: the gateway config and grants are read again here, then each worker reads the config again.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import signal
import socket
import sys

from aotx.engine_service import EngineService
from aotx.runtime import GrantedRuntime, RuntimeRpcServer
from aotx.serving import ModelService
from api.app import create_app
from api.drain import drain_of
from api.ops_routes import WORKERS_EXT
from api.server import bind_socket, serve_app
from api.settings import GatewaySettings
from api.shared import attach_shared
from api.stored_access import attach_stored
from eventlog import NatsAuth
from ops.http_workers import HttpWorkers, WorkersFailed
from ops.ready_block import ReadyFacts, model_file, print_ready, tokens_note
from ops.reload import on_sighup, serve_reloader
from ops.shared_stack import boot_summary
from ops.shutdown import FLUSH_SECONDS, cancel_leftovers, graceful_timeout

STOP_MARGIN = 5.0   # seconds past a worker's own drain bound before it is killed


def worker_spec(args, service: ModelService, settings: GatewaySettings, config, nats_url: str,
                auth: NatsAuth | None, engine: str, runtime: str, main_url: str) -> dict:
    return {"host": settings.host, "port": settings.port, "nats_url": nats_url,
            "nats_auth": dataclasses.asdict(auth) if auth is not None else None,
            "engine": engine, "runtime": runtime, "main_url": main_url, "config": str(config.path),
            "model": args.model, "model_id": service.model_id, "backend": service.backend_name,
            "created": service.created, "context_tokens": service.context_tokens,
            "default_max_tokens": service.default_max_tokens, "shutdown_grace": settings.shutdown_grace,
            "sampling_defaults": service.sampling_defaults.json(),
            "log_level": args.log_level, "parent": os.getpid()}


async def serve_with_workers(args, service: ModelService, settings: GatewaySettings, config, shared: GrantedRuntime,
                             nats_url: str, auth: NatsAuth | None, shown_url: str, embedded: bool,
                             sockets: list[socket.socket]) -> int:
    """`shared` is booted already. Runs until a signal; returns the exit status."""
    private = bind_socket("127.0.0.1", 0)
    main_url = f"http://127.0.0.1:{private.getsockname()[1]}"
    app = create_app(service, settings)   # the public settings: auth as on the public address
    attach_shared(app, shared, config.shared_principals(),
                  models=({"id": service.model_id, "media": False, "automatic_memory": False},))
    attach_stored(app, shared.runtime.stored)
    name = secrets.token_hex(8)   # this server's subjects: two servers on one NATS never mix
    rpc = await RuntimeRpcServer(shared, nats_url, f"serve-{name}", auth=auth).start()
    engine = await EngineService(service, nats_url, name, auth=auth).start()
    public_port = sockets[0].getsockname()[1]
    workers = HttpWorkers(sockets, worker_spec(args, service, dataclasses.replace(settings, port=public_port),
                                               config, nats_url, auth, name, f"serve-{name}", main_url))
    app.extensions[WORKERS_EXT] = workers.snapshot   # /v1/stats `http_workers` (the workers forward it here)
    stop, drain, status = asyncio.Event(), drain_of(app), {"code": 0}
    worker_bound = graceful_timeout(settings.shutdown_grace) + FLUSH_SECONDS + STOP_MARGIN
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task] = set()   # held until done (the loop keeps only weak references)

    def spawn(coro) -> None:
        task = loop.create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def stop_all() -> None:
        await workers.stop(worker_bound)
        stop.set()
        drain.begin()

    def on_signal() -> None:
        if workers.stopping:   # a second signal: hurry every drain
            workers.signal_all(signal.SIGTERM)
            drain.hurry()
            return
        workers.stopping = True
        spawn(stop_all())

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    reload = serve_reloader(app, shared, config.path, shared.grants.path.parent)

    def on_hup() -> bool:   # the config and grants here first, then every worker reads the config again
        done = reload()
        if done:
            workers.signal_all(signal.SIGHUP)
        return done

    on_sighup(on_hup)

    async def start_workers() -> None:
        try:
            await workers.start()
        except WorkersFailed as exc:
            print(f"aotx serve: {exc}", file=sys.stderr, flush=True)
            status["code"] = 1
            await stop_all()
            return
        note, token_dir = tokens_note(args)
        print_ready(ReadyFacts(settings.host, public_port, service.model_id, service.backend_name,
                               model_file(service), settings.require_auth, note, shown_url, embedded,
                               boot_summary(shared.runtime), token_dir,
                               f", {len(workers.procs)} HTTP workers {' '.join(map(str, workers.pids))}"))

    try:
        await serve_app(app, "127.0.0.1", private.getsockname()[1], stop,
                        on_ready=lambda h, p: spawn(start_workers()), sock=private,
                        graceful_timeout=graceful_timeout(settings.shutdown_grace))
    finally:
        if not workers.stopping or any(p.returncode is None for p in workers.procs):
            await workers.stop(worker_bound)
        await engine.stop()
        await rpc.stop()
        await shared.stop()
        await cancel_leftovers()
    return status["code"]
