"""One HTTP worker of `aotx serve --http-workers N` (`python -m ops.http_worker`, started by ops.http_workers).

It serves every route `aotx serve` serves, on its own listening socket of the server's port (SO_REUSEPORT,
handed over as a file descriptor): the four model surfaces with prompts rendered here and generations run
by the engine process over NATS (aotx.serving_remote), /aotx/v1/shared through the runtime's NATS RPC
(aotx.runtime.rpc, as `aotx gateway`; with `--leases` its own instance's runtime first, which sends it to
the lineage's holder), and the routes whose state has one writer forwarded to the main
process's private listener (api.worker_proxy). It prints `ready` on stdout once it listens, drains on
SIGTERM/SIGINT like `aotx serve`, and stops by itself when its parent process is gone.

Its settings come as JSON in the environment variable AOTX_HTTP_WORKER (never on the command line: the
NATS credentials are in it).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys

from aotx.runtime import RemoteRuntime
from aotx.sampling_defaults import SamplingDefaults
from aotx.serving_remote import EngineClient, RemoteModelService
from api.app import create_app
from api.drain import drain_of
from api.gateway_config import load_gateway_config
from api.server import run_serving, serve_app
from api.settings import GatewaySettings
from api.shared import attach_shared
from api.worker_proxy import install_forwarding
from eventlog import NatsAuth
from ops import logs
from ops.http_workers import SPEC_ENV
from ops.reload import gateway_reloader, on_sighup
from ops.shutdown import cancel_leftovers, graceful_timeout, install_shutdown_signals

PARENT_POLL = 0.5   # seconds between looks at the parent process
log = logging.getLogger("aotx.http_worker")


def main() -> int:
    spec = json.loads(os.environ.pop(SPEC_ENV))
    logs.configure(spec.get("log_level", "warning"))
    from kernels.text_side import (
        load_text_side,  # the tokenizer and chat template, no weights
    )

    text = load_text_side(spec.get("model"))
    config = load_gateway_config(spec["config"])
    settings = GatewaySettings(host=spec["host"], port=spec["port"], token_digests=config.token_digests(),
                               shutdown_grace=spec["shutdown_grace"])
    sock = socket.socket(fileno=spec["fd"])
    auth = NatsAuth(**spec["nats_auth"]) if spec.get("nats_auth") else None
    return run_serving(_serve(spec, text, config, settings, sock, auth))


async def _serve(spec: dict, text, config, settings: GatewaySettings, sock: socket.socket,
                 auth: NatsAuth | None) -> int:
    client = await EngineClient(spec["nats_url"], spec["engine"], auth=auth,
                                worker=f"{spec['index']}-{os.getpid()}").start()
    service = RemoteModelService(text, client, model_id=spec["model_id"], backend_name=spec["backend"],
                                 created=spec["created"], context_tokens=spec["context_tokens"],
                                 default_max_tokens=spec["default_max_tokens"],
                                 sampling_defaults=SamplingDefaults(**spec["sampling_defaults"]))
    remote = await worker_remote(spec, config.config_sha256, auth).start()
    app = create_app(service, settings)
    attach_shared(app, remote, config.shared_principals(),
                  models=({"id": spec["model_id"], "media": False, "automatic_memory": False},))
    install_forwarding(app, spec["main_url"])
    stop = asyncio.Event()
    drain = drain_of(app)
    install_shutdown_signals(stop, drain)
    on_sighup(gateway_reloader(app, config.path))   # the main process sends it after its own reload
    watcher = asyncio.get_running_loop().create_task(_watch_parent(spec["parent"], stop, drain))

    def ready(host: str, port: int) -> None:
        print("ready", flush=True)

    try:
        await serve_app(app, settings.host, settings.port, stop, on_ready=ready, sock=sock,
                        graceful_timeout=graceful_timeout(settings.shutdown_grace), freeze_gc=True)
    finally:
        watcher.cancel()
        await remote.stop()
        await service.stop()
        await cancel_leftovers()
    return 0


def worker_remote(spec: dict, config_sha256: str, auth: NatsAuth | None) -> RemoteRuntime:
    """The worker's shared port: the main process's runtime over NATS, its own boot asked first in lease
    mode (`home`; ops.serve_workers.runtime_for_workers)."""
    return RemoteRuntime(spec["nats_url"], spec["runtime"], config_sha256, auth=auth, home=spec.get("home"))


async def _watch_parent(parent: int, stop: asyncio.Event, drain) -> None:
    """The main process ended without stopping us (kill -9): stop at once, leave no orphan."""
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL)
    log.warning("the main process %d is gone; this HTTP worker stops", parent)
    stop.set()
    drain.begin()
    drain.hurry()


if __name__ == "__main__":
    sys.exit(main())
