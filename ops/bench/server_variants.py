"""The HTTP servers a benchmark can put under the same app, so it prints a ratio against a peer measured
in the same run (ops.bench.http_stream_cost, ops.bench.http_request_cost):

* `uvicorn`: what `aotx serve` runs (api.server.serve_app on uvloop, api.server.run_serving);
* `uvicorn-asyncio`: the same server on asyncio's own loop (what uvloop adds, apart);
* `hypercorn`: the former server (hypercorn 0.18 + h11 on asyncio's loop, the settings api.server had
  until it moved to uvicorn); installed as Quart's own dependency, used by no product code.
"""
from __future__ import annotations

import asyncio
import socket

SERVERS = ("hypercorn", "uvicorn-asyncio", "uvicorn")


async def _hypercorn(app, sock: socket.socket, stop: asyncio.Event) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.graceful_timeout = 2.0
    config.keep_alive_timeout = 75.0
    await serve(app, config, shutdown_trigger=stop.wait)


def serve_variant(server: str, app, sock: socket.socket) -> None:
    """Serve `app` on the listening `sock` with `server` (one of SERVERS) until the process ends."""
    from api.server import run_serving, serve_app

    if server == "hypercorn":
        asyncio.run(_hypercorn(app, sock, asyncio.Event()))
    elif server == "uvicorn-asyncio":
        asyncio.run(serve_app(app, "127.0.0.1", 0, asyncio.Event(), sock=sock))
    elif server == "uvicorn":
        run_serving(serve_app(app, "127.0.0.1", 0, asyncio.Event(), sock=sock))
    else:
        raise ValueError(f"unknown server {server!r}: one of {', '.join(SERVERS)}")
