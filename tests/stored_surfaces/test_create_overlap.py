"""A stored response's CreateResponse is journalled while the engine already works on the request
(api/surfaces/responses/stored_run.py `StoredRun.begin`): the engine is asked at once, and nothing of the
answer (no status line, no byte) goes out before the store has the response. A create refused by the
hold it discovers cancels the generation and stores nothing; a hold already known refuses before the
engine is asked. The runtime's real stored port, with CreateResponse held back (or refused) by the test."""
from __future__ import annotations

import asyncio
import json

import pytest

from aotx.stored import CreateResponse, Reason, StoredRefusal
from tests.waiting import wait_until_async

from .conftest import call, openai_error, sse_events, stored_app

pytestmark = pytest.mark.asyncio(loop_scope="session")
BOUND = 60   # seconds: a bound on a wait that must end, so that the old behaviour fails instead of hanging
ASK = {"model": "smollm2-135m-instruct", "input": "hi"}


class GatedCreate:
    """The stored port, with every CreateResponse waiting for `release` (or answered `refuse` instead of
    being journalled); `creating` is set once one is asked, `landed` once the store has it."""

    def __init__(self, port, refuse: StoredRefusal | None = None) -> None:
        self._port, self.refuse = port, refuse
        self.release, self.creating, self.landed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    def __getattr__(self, name):
        return getattr(self._port, name)

    async def record(self, identity, command):
        if not isinstance(command, CreateResponse):
            return await self._port.record(identity, command)
        self.creating.set()
        await self.release.wait()
        if self.refuse is not None:
            return self.refuse
        out = await self._port.record(identity, command)
        self.landed.set()
        return out


async def _open(client, body: dict):
    conn = client.request("/v1/responses", method="POST", headers={"Authorization": "Bearer key-a",
                                                                  "content-type": "application/json"})
    await conn.__aenter__()
    await conn.send(json.dumps(body).encode())
    await conn.send_complete()
    return conn


async def _idle_loop(turns: int = 50) -> None:
    """Give every ready task of the loop its turns (the test client passes bytes through in-memory queues)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_the_engine_is_asked_while_the_create_is_in_flight_and_no_byte_goes_before_it_lands(service,
                                                                                                   runtime):
    port = GatedCreate(runtime.stored.journal)
    client = stored_app(service, port).test_client()
    conn = await _open(client, {**ASK, "stream": True})
    await asyncio.wait_for(port.creating.wait(), BOUND)
    await wait_until_async(lambda: len(service.submitted), "the engine to be asked while the create is in flight",
                           timeout=BOUND)
    first = asyncio.ensure_future(conn.receive())
    await _idle_loop()
    assert not first.done(), "a byte went out before the store had the response"
    port.release.set()
    text = (await asyncio.wait_for(first, BOUND)).decode()
    assert port.landed.is_set()
    while "response.completed" not in text:
        text += (await asyncio.wait_for(conn.receive(), BOUND)).decode()
    response_id = sse_events(text)[0]["response"]["id"]
    await conn.__aexit__(None, None, None)
    status, got = await call(client, "GET", f"/v1/responses/{response_id}")
    assert status == 200 and got["status"] == "completed" and got["output"][0]["content"][0]["text"] == "Hello world"


async def test_a_buffered_request_is_answered_once_the_create_landed(service, runtime):
    port = GatedCreate(runtime.stored.journal)
    client = stored_app(service, port).test_client()
    answer = asyncio.ensure_future(call(client, "POST", "/v1/responses", ASK))
    await asyncio.wait_for(port.creating.wait(), BOUND)
    await wait_until_async(lambda: len(service.submitted), "the engine to be asked while the create is in flight",
                           timeout=BOUND)
    await _idle_loop()
    assert not answer.done()
    port.release.set()
    status, made = await asyncio.wait_for(answer, BOUND)
    assert status == 200 and made["status"] == "completed"
    assert (await call(client, "GET", f"/v1/responses/{made['id']}"))[1] == made


@pytest.mark.parametrize("stream", [False, True])
async def test_a_create_refused_by_the_hold_it_discovers_cancels_the_generation_and_stores_nothing(
        service, runtime, stream):
    port = GatedCreate(runtime.stored.journal, refuse=StoredRefusal(Reason.HOLD, "the stream is full"))
    port.release.set()
    client = stored_app(service, port).test_client()
    err = openai_error(await call(client, "POST", "/v1/responses", {**ASK, "stream": stream}), 429)
    assert err["code"] == "journal_hold"
    assert len(service.handles) == 1 and service.handles[0].cancelled
    assert runtime.projector.stored.totals.responses == 0


async def test_an_engine_refusal_while_the_create_is_in_flight_leaves_nothing_stored(service, runtime):
    service.reject = ("queue_full", "the engine is full")
    port = GatedCreate(runtime.stored.journal)
    port.release.set()
    client = stored_app(service, port).test_client()
    status, body = await call(client, "POST", "/v1/responses", ASK)
    assert status == 429 and "error" in body
    assert runtime.projector.stored.totals.responses == 0   # recorded, then deleted again before the 429
