"""`serve_app`'s ready callback (the ready line of `aotx gateway`, `aotx serve`, an HTTP worker) comes once
the app's startup hooks have run, and never when one of them failed (issue 15's cluster drill: a gateway
printed its ready line, then its media-store attach in a startup hook timed out: "Lifespan failure in
startup. 'nats: timeout'")."""
from __future__ import annotations

import asyncio

import httpx
import pytest
from quart import Quart

from api.server import serve_app


async def test_ready_comes_after_the_startup_hooks_ran():
    app = Quart("ready-after-startup")
    started, release = asyncio.Event(), asyncio.Event()
    ready: asyncio.Future = asyncio.get_running_loop().create_future()

    @app.before_serving
    async def attach() -> None:   # stands for the runtime boot or the media-store attach
        started.set()
        await release.wait()

    @app.get("/ping")
    async def ping():
        return "pong"

    stop = asyncio.Event()
    server = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop, on_ready=lambda h, p: ready.set_result(p)))
    try:
        await asyncio.wait_for(started.wait(), 30)
        assert not ready.done()            # a startup hook is still running: not ready
        release.set()
        port = await asyncio.wait_for(ready, 30)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"http://127.0.0.1:{port}/ping")).text == "pong"
    finally:
        stop.set()
        release.set()
        await asyncio.wait_for(server, 30)


async def test_no_ready_when_a_startup_hook_fails():
    app = Quart("startup-fails")
    called: list[int] = []

    @app.before_serving
    async def attach() -> None:
        raise TimeoutError("nats: timeout")

    with pytest.raises(Exception, match="nats: timeout"):
        await asyncio.wait_for(serve_app(app, "127.0.0.1", 0, asyncio.Event(), on_ready=lambda h, p: called.append(p)),
                               30)
    assert called == []


async def test_connections_the_server_accepts_have_nagle_off():
    """asyncio's loop sets TCP_NODELAY on an accepted connection only when the listener's proto is TCP;
    bind_socket's says 0, so serve_app listens on tcp_listener's copy (with Nagle on, uvicorn's first SSE
    token waited ~40 ms for the client's delayed ACK: docs/PERFORMANCE.md "The HTTP server")."""
    import socket

    from api.server import bind_socket, tcp_listener

    async def nodelay_of_an_accepted_connection(listener: socket.socket) -> int:
        accepted: asyncio.Future = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport) -> None:
                accepted.set_result(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP,
                                                                                   socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        try:
            _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
            value = await asyncio.wait_for(accepted, 30)
            writer.close()
            return value
        finally:
            server.close()

    plain = bind_socket("127.0.0.1", 0)
    assert plain.proto == 0
    plain.close()
    assert await nodelay_of_an_accepted_connection(bind_socket("127.0.0.1", 0)) == 0   # why the copy
    assert await nodelay_of_an_accepted_connection(tcp_listener(bind_socket("127.0.0.1", 0))) != 0


async def test_freeze_gc_freezes_what_start_up_made_before_the_ready_callback():
    """The serving commands pass freeze_gc=True (s15-rows256: a full collection walked the engine process's
    start-up objects, 19-24 ms with the GIL held): by the ready callback they are out of the collector's reach."""
    import gc

    app = Quart("freeze-gc")
    made_at_start: list = []

    @app.before_serving
    async def load() -> None:   # stands for the model and the replayed state
        made_at_start.extend([i] for i in range(1000))

    frozen_at_ready: asyncio.Future = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    server = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop, freeze_gc=True,
                                           on_ready=lambda h, p: frozen_at_ready.set_result(gc.get_freeze_count())))
    try:
        assert await asyncio.wait_for(frozen_at_ready, 30) >= len(made_at_start)
        tracked = {id(o) for o in gc.get_objects()}   # (the generations the collector walks; not the frozen)
        assert all(gc.is_tracked(o) and id(o) not in tracked for o in made_at_start)
    finally:
        stop.set()
        await asyncio.wait_for(server, 30)
        gc.unfreeze()   # (the test process goes on collecting as before)
