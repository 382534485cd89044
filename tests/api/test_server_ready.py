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
