"""`aotx serve --http-workers N` (N > 1): the main process's part.

The main process keeps NATS, the shared runtime, the engine and the stored surfaces' state. It serves
the full app (as `aotx serve` with one process does) on a private loopback port, the target of what
the workers forward (api.worker_proxy); it serves the engine to the workers over NATS
(aotx.engine_service) and the shared runtime through its NATS RPC (aotx.runtime.rpc). The N workers
(ops.http_workers) listen on the public host:port. The ready line is printed once all of them listen.

With `--leases` (runtime_for_workers) the runtime answers on the subjects of its runtime name, as every
instance sharing the journal does (aotx.runtime.routed), and the private app uses the routing ports: a
stored call for a lineage another instance writes goes to it. A worker's RemoteRuntime asks this
instance's boot first (`home`): a command for a free lineage takes it here, one for a lineage another
instance holds is answered `not_owner` naming the holder and sent there, as the single-process gateway does.
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

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from aotx.engine_service import EngineService
from aotx.runtime import GrantedRuntime, RuntimeRpcServer
from aotx.runtime.routed import routed
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


@dataclass
class WorkersRuntime:
    """The runtime side of the main process: the private app's ports, and where the workers' RemoteRuntime
    sends (`name`: the rpc subjects' runtime name; `home`: the boot it asks first, lease mode only)."""

    port: Any                                # GrantedRuntime, or RoutedRuntime in lease mode
    stored: Any                              # its StoredJournal
    name: str
    home: str | None
    stop: Callable[[], Awaitable[None]]      # the rpc server, then the runtime


async def runtime_for_workers(shared: GrantedRuntime, runtime_name: str, config_sha256: str, nats_url: str,
                              auth: NatsAuth | None) -> WorkersRuntime:
    """`shared` is booted. Lease mode: answering as runtime `runtime_name` (the name every instance shares)
    with the routing ports; else on subjects of this server alone (two servers on one NATS never mix)."""
    if shared.runtime.lease_policy is not None:
        port = await routed(shared, runtime_name, config_sha256)
        return WorkersRuntime(port, port.stored, runtime_name, shared.runtime.boot_id, port.stop)
    name = f"serve-{secrets.token_hex(8)}"
    rpc = await RuntimeRpcServer(shared, nats_url, name, auth=auth).start()

    async def stop() -> None:
        await rpc.stop()
        await shared.stop()
    return WorkersRuntime(shared, shared.runtime.stored, name, None, stop)


def worker_spec(args, service: ModelService, settings: GatewaySettings, config, nats_url: str,
                auth: NatsAuth | None, engine: str, runtime: WorkersRuntime, main_url: str) -> dict:
    return {"host": settings.host, "port": settings.port, "nats_url": nats_url,
            "nats_auth": dataclasses.asdict(auth) if auth is not None else None,
            "engine": engine, "runtime": runtime.name, "home": runtime.home, "main_url": main_url,
            "config": str(config.path),
            "model": args.model, "model_id": service.model_id, "backend": service.backend_name,
            "created": service.created, "context_tokens": service.context_tokens,
            "default_max_tokens": service.default_max_tokens, "shutdown_grace": settings.shutdown_grace,
            "sampling_defaults": service.sampling_defaults.json(),
            "log_level": args.log_level, "parent": os.getpid()}


async def serve_with_workers(args, service: ModelService, settings: GatewaySettings, config, shared: GrantedRuntime,
                             nats_url: str, auth: NatsAuth | None, shown_url: str, embedded: bool,
                             sockets: list[socket.socket], runtime_name: str, lease_note: str = "") -> int:
    """`shared` is booted already. Runs until a signal; returns the exit status."""
    try:
        runtime = await runtime_for_workers(shared, runtime_name, config.config_sha256, nats_url, auth)
    except Exception as exc:  # NATS refused the rpc subjects (permissions) or went away
        print(f"aotx serve: the runtime could not answer on NATS: {type(exc).__name__}: {exc}", file=sys.stderr)
        await shared.stop()   # gives its leases back
        return 1
    private = bind_socket("127.0.0.1", 0)
    main_url = f"http://127.0.0.1:{private.getsockname()[1]}"
    app = create_app(service, settings)   # the public settings: auth as on the public address
    attach_shared(app, runtime.port, config.shared_principals(),
                  models=({"id": service.model_id, "media": False, "automatic_memory": False},))
    attach_stored(app, runtime.stored)
    name = secrets.token_hex(8)   # this server's engine subjects: two servers on one NATS never mix
    engine = await EngineService(service, nats_url, name, auth=auth).start()
    public_port = sockets[0].getsockname()[1]
    workers = HttpWorkers(sockets, worker_spec(args, service, dataclasses.replace(settings, port=public_port),
                                               config, nats_url, auth, name, runtime, main_url))
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
                               boot_summary(shared.runtime) + lease_note, token_dir,
                               f", {len(workers.procs)} HTTP workers {' '.join(map(str, workers.pids))}"))

    try:
        await serve_app(app, "127.0.0.1", private.getsockname()[1], stop,
                        on_ready=lambda h, p: spawn(start_workers()), sock=private,
                        graceful_timeout=graceful_timeout(settings.shutdown_grace), freeze_gc=True)
    finally:
        if not workers.stopping or any(p.returncode is None for p in workers.procs):
            await workers.stop(worker_bound)
        await engine.stop()
        await runtime.stop()
        await cancel_leftovers()
    return status["code"]
