"""Serve a Quart app with uvicorn (httptools parser) on a socket we bind ourselves (so port 0 reports the
real port); `run_serving` runs a serving command's coroutine on uvloop.

Why uvicorn + httptools + uvloop, not hypercorn + h11 (docs/PERFORMANCE.md "The HTTP server"): on the
same box and run, it cuts the server's CPU per streamed SSE token and per small POST by about a half."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvicorn
import uvloop

T = TypeVar("T")
log = logging.getLogger("aotx.http")
KEEP_ALIVE_SECONDS = 75.0


class StartupFailed(RuntimeError):
    """The app's startup (before_serving) hooks failed: nothing was served."""


def run_serving(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on uvloop: the loop `aotx serve`, `aotx gateway` and an HTTP worker serve on."""
    return uvloop.run(main)


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def tcp_listener(sock: socket.socket) -> socket.socket:
    """`sock` re-made from its descriptor (`sock` is detached), so its proto reads IPPROTO_TCP: asyncio's
    loop sets TCP_NODELAY on accepted connections only then (one made with proto 0, as bind_socket's,
    leaves Nagle on: a small SSE write then waits ~40 ms for the client's delayed ACK)."""
    return socket.socket(fileno=sock.detach())


class _Server(uvicorn.Server):
    """uvicorn's server without its own SIGINT/SIGTERM handlers: the serving command owns the signals
    (ops.shutdown) and says stop through `serve_app`'s event."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


async def serve_app(app, host: str, port: int, stop: asyncio.Event,
                    on_ready: Callable[[str, int], None] | None = None, *,
                    sock: socket.socket | None = None, graceful_timeout: float = 2.0,
                    freeze_gc: bool = False) -> None:
    """Serve until `stop` is set; then the listener closes, idle keep-alive connections close, the
    connections still answering get up to `graceful_timeout` seconds (api.drain ends those in time;
    then their tasks are cancelled) and the app's after_serving hooks run. `on_ready(host, port)` is
    called once the app's startup (before_serving) hooks have run, never when one failed (then
    StartupFailed). `sock`: a listening socket bound already (bind_socket, or one an HTTP worker got
    bound and not yet listening), so a caller can claim the port before it starts anything that
    writes; otherwise host:port is bound here. Works on asyncio's loop and on uvloop. `freeze_gc` (the
    serving commands): once started, everything made so far (the model, tables, the replayed state) is
    collected once and moved out of the cyclic collector's reach (`freeze_startup`)."""
    sock = tcp_listener(sock if sock is not None else bind_socket(host, port))
    bound_port = sock.getsockname()[1]
    failure: list[str] = []

    def ready() -> None:
        if freeze_gc:
            freeze_startup()
        if on_ready is not None:
            on_ready(host, bound_port)

    config = uvicorn.Config(_watch_startup(app, ready, failure), http="httptools", ws="none", lifespan="on",
                            loop="none", interface="asgi3", proxy_headers=False, server_header=False,
                            access_log=False, log_config=None, log_level=logging.WARNING,
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, timeout_graceful_shutdown=graceful_timeout,
                            backlog=1024)
    server = _Server(config)

    async def stop_when_asked() -> None:
        await stop.wait()
        server.should_exit = True   # uvicorn's main loop looks every 0.1 s

    watcher = asyncio.get_running_loop().create_task(stop_when_asked())
    try:
        await server.serve(sockets=[sock])
    except SystemExit:   # uvicorn's way out when the app's startup failed
        raise StartupFailed(f"Lifespan failure in startup. {failure[0] if failure else 'no reason given'!r}") \
            from None
    finally:
        watcher.cancel()
        sock.close()


def freeze_startup() -> None:
    """Collect once, then freeze what is left (gc.freeze): a serving process holds hundreds of thousands
    of long-lived objects from its start (the model's tables, the replayed state), and every full
    collection walked them all, 19-24 ms with the GIL held in a loaded engine process (docs/PERFORMANCE.md,
    s15-rows256: one landing mid-step cost the step's readers ~1.2 µs a row-step). Refcounting still frees
    them; only a cycle among them made before the freeze stays until the process ends."""
    gc.collect()
    gc.freeze()
    log.debug("gc: %d objects frozen after start-up", gc.get_freeze_count())


def _watch_startup(app, ready: Callable[[], None], failure: list[str]):
    """The ASGI app, calling `ready` right after it reported its lifespan startup complete (a ready line
    printed before, e.g. before a media-store attach in a before_serving hook, could be followed by the
    process's end), and keeping the reason the app gave when its startup failed."""
    async def watching(scope, receive, send):
        if scope["type"] != "lifespan":
            return await app(scope, receive, send)

        async def sending(message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                ready()
            elif message["type"] == "lifespan.startup.failed":
                failure.append(str(message.get("message", "")))
        return await app(scope, receive, sending)
    return watching
