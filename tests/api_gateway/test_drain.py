"""api.drain: while draining a request answers 503 in its native envelope; the grace waits for the
engine's requests (at most `grace` seconds, less when they end, none after a second signal), then
the streams close and the engine stops."""
from __future__ import annotations

import asyncio

from api.app import create_app
from api.drain import EXT, Drain
from api.settings import GatewaySettings
from tests.api_gateway.test_auth_and_bind import _IdleService


class _Engine:
    def __init__(self, busy: bool) -> None:
        self.is_busy, self.stopped = busy, asyncio.Event()

    def busy(self) -> bool:
        return self.is_busy

    async def stop(self) -> None:
        self.stopped.set()


async def test_requests_while_draining_answer_503_in_their_native_envelope():
    app = create_app(_IdleService(), GatewaySettings(shutdown_grace=0))
    client = app.test_client()
    assert (await client.get("/v1/models")).status_code == 200
    app.extensions[EXT].begin()
    r = await client.post("/v1/messages", json={"model": "m", "max_tokens": 1, "messages": []})
    assert r.status_code == 503 and "x-should-retry" not in r.headers    # retryable elsewhere
    body = await r.get_json()
    assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
    r = await client.post("/v1/chat/completions", json={})
    assert r.status_code == 503
    error = (await r.get_json())["error"]
    assert error["type"] == "server_error" and error["code"] == "server_shutting_down"
    assert "shutting down" in error["message"]
    await app.extensions[EXT].finish()


async def test_the_grace_ends_when_the_engine_has_nothing_left():
    engine = _Engine(busy=True)
    drain = Drain(grace=600, busy=engine.busy, stop_engine=engine.stop)
    drain.begin()
    await asyncio.sleep(0)
    assert drain.draining and not drain.closing and not engine.stopped.is_set()
    engine.is_busy = False
    await asyncio.wait_for(drain.finish(), 30)
    assert drain.closing and engine.stopped.is_set()


async def test_the_grace_is_a_bound_and_a_second_signal_ends_it():
    engine = _Engine(busy=True)
    drain = Drain(grace=0.2, busy=engine.busy, stop_engine=engine.stop)
    await asyncio.wait_for(drain.finish(), 30)        # still busy: the engine is stopped anyway
    assert engine.stopped.is_set()
    engine = _Engine(busy=True)
    drain = Drain(grace=600, busy=engine.busy, stop_engine=engine.stop)
    drain.begin()
    drain.hurry()
    await asyncio.wait_for(drain.finish(), 30)
    assert engine.stopped.is_set()


async def test_race_gives_way_to_closing():
    drain = Drain(grace=0)
    assert await drain.race(asyncio.sleep(0, "done")) is True
    waiting = asyncio.ensure_future(drain.race(asyncio.sleep(600)))
    await asyncio.sleep(0)
    drain.begin()
    assert await asyncio.wait_for(waiting, 30) is False
    assert await drain.race(asyncio.sleep(600)) is False   # already closing: not even started
