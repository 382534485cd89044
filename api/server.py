"""Run a Quart app on hypercorn on a socket we bind ourselves (so port 0 reports the real port)."""
from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from hypercorn.asyncio import serve
from hypercorn.config import Config


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


async def serve_app(app, host: str, port: int, stop: asyncio.Event,
                    on_ready: Callable[[str, int], None] | None = None, *,
                    sock: socket.socket | None = None, graceful_timeout: float = 2.0) -> None:
    """Serve until `stop` is set; then hypercorn closes the listener and idle connections and waits
    up to `graceful_timeout` seconds for the connections still answering (api.drain ends those in
    time) before the app's after_serving hooks run. `on_ready(host, port)` is called once the app's
    startup (before_serving) hooks have run, never when one failed. `sock`: a listening socket bound already
    (bind_socket), so a caller can claim the port before it starts anything that writes; otherwise
    host:port is bound here."""
    if sock is None:
        sock = bind_socket(host, port)
    bound_port = sock.getsockname()[1]
    config = Config()
    # hypercorn wraps the descriptor in its own socket object and closes it at shutdown
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.graceful_timeout = graceful_timeout
    config.keep_alive_timeout = 75.0
    if on_ready is not None:   # once the app's startup hooks ran (never when one failed)
        app = _after_startup(app, lambda: on_ready(host, bound_port))
    await serve(app, config, shutdown_trigger=stop.wait)


def _after_startup(app, ready: Callable[[], None]):
    """The ASGI app, calling `ready` right after it reported its lifespan startup complete: a ready line
    printed before (a runtime boot, a media-store attach in a before_serving hook) could be followed by
    "Lifespan failure in startup" and the process's end."""
    async def announcing(scope, receive, send):
        if scope["type"] != "lifespan":
            return await app(scope, receive, send)

        async def sending(message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                ready()
        return await app(scope, receive, sending)
    return announcing
