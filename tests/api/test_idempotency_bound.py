"""A keyed `/v1/responses` with `store: true` is saved once: its key is bound to the stored response
(BeginKey.bound) and keeps no chunks of its own; a repeat is answered from the stored response — the buffered
JSON, or the stream's events saved in it — byte for byte, with the replay header, and never runs again. Once
that response is deleted, a repeat is a 409 (the key never yields another answer). `store: false` keeps its
answer in the key's chunks as before."""
from __future__ import annotations

import asyncio
import json

import pytest

from aotx.stored import FinishKey, KeyEnd, KeyState, identity_of_key
from api.idempotency.header import body_digest
from tests.waiting import wait_until_async

from .test_idempotency import BODIES, REPLAYED, post, running

PATH, BODY = BODIES["responses"]
ALICE = identity_of_key("sk-a")


def _key_record(runtime, key):
    return runtime.stored.reads.state.book(ALICE).keys[("responses", key)]


def _response_id(data: bytes, stream: bool) -> str:
    if not stream:
        return json.loads(data)["id"]
    first = next(line for line in data.decode().splitlines() if line.startswith("data: "))
    return json.loads(first[6:])["response"]["id"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_keyed_stored_response_is_saved_once_and_replayed_from_it(nats_url, stream):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        body = {**BODY, "stream": stream}
        first, data = await post(client, PATH, body, "once")
        assert first.status_code == 200 and REPLAYED not in first.headers
        rid = _response_id(data, stream)
        record = _key_record(runtime, "once")
        assert record.started.bound == rid and tuple(record.chunks) == ()      # no second copy
        stored = runtime.stored.reads.state.book(ALICE).responses[rid]
        if stream:
            assert b"".join(stored.events) == data                             # the stream, saved once, in it
        again, data2 = await post(client, PATH, body, "once")
        assert again.status_code == 200 and again.headers[REPLAYED] == "true" and data2 == data
        assert again.headers["Content-Type"] == first.headers["Content-Type"]
        got, view = await client.get(f"/v1/responses/{rid}", headers={"Authorization": "Bearer sk-a"}), None
        view = json.loads(await got.get_data())
        if not stream:
            assert json.loads(data) == view                                     # the answer is the stored response
        assert view["status"] == "completed" and len(service.submitted) == 1
        deleted = await client.delete(f"/v1/responses/{rid}", headers={"Authorization": "Bearer sk-a"})
        assert deleted.status_code == 200
        gone, err = await post(client, PATH, body, "once")
        assert gone.status_code == 409, err
        envelope = json.loads(err)["error"]
        assert envelope["param"] == "Idempotency-Key" and envelope["code"] == "idempotency_key_answer_deleted"
        assert len(service.submitted) == 1


async def test_a_streamed_repeat_follows_a_running_bound_first_attempt(nats_url):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        body = {**BODY, "stream": True}
        service.gate.clear()
        first = asyncio.ensure_future(post(client, PATH, body, "live"))
        digest = body_digest(body)
        await wait_until_async(lambda: runtime.stored.reads.key(ALICE, "responses", "live", digest).state,
                               "the first attempt to start", done=lambda s: s is KeyState.RUNNING)
        bound = runtime.stored.reads.key(ALICE, "responses", "live", digest).bound
        await wait_until_async(lambda: runtime.stored.reads.state.book(ALICE).responses[bound].events,
                               "the first attempt to save its first events")
        repeat = asyncio.ensure_future(post(client, PATH, body, "live"))
        await wait_until_async(lambda: len(runtime.stored.signals), "the repeat to follow the first attempt")
        service.gate.set()
        (r1, d1), (r2, d2) = await asyncio.gather(first, repeat)
        assert r1.status_code == r2.status_code == 200 and r2.headers[REPLAYED] == "true"
        assert d1 == d2 and b"response.completed" in d2 and len(service.submitted) == 1
        assert tuple(_key_record(runtime, "live").chunks) == ()


async def test_a_streamed_repeat_following_a_bound_attempt_that_ends_interrupted_ends_with_the_error(nats_url,
                                                                                                  monkeypatch):
    """The key's end wakes the follower at once: it waits on the bound response's events and on the key
    (before, only on the events: it saw the interrupted key after a whole FOLLOW_WAIT, 30 s)."""
    from api.idempotency import gate
    monkeypatch.setattr(gate, "FOLLOW_WAIT", 3600.0)
    async with running(nats_url) as rig:
        client, service, runtime = rig
        body = {**BODY, "stream": True}
        service.gate.clear()
        first = asyncio.ensure_future(post(client, PATH, body, "cut"))
        digest = body_digest(body)
        await wait_until_async(lambda: runtime.stored.reads.key(ALICE, "responses", "cut", digest).bound,
                               "the first attempt to start")
        bound = runtime.stored.reads.key(ALICE, "responses", "cut", digest).bound
        await wait_until_async(lambda: runtime.stored.reads.state.book(ALICE).responses[bound].events,
                               "the first attempt to save its first events")
        repeat = asyncio.ensure_future(post(client, PATH, body, "cut"))
        await wait_until_async(lambda: len(runtime.stored.signals), "the repeat to follow the first attempt")
        await runtime.stored.record(ALICE, FinishKey("responses", "cut", 409, {}, KeyEnd.INTERRUPTED))
        r, data = await asyncio.wait_for(repeat, 60)    # woken by the key's end, not by a FOLLOW_WAIT
        assert r.status_code == 200 and r.headers[REPLAYED] == "true"
        blocks = [b for b in data.decode().split("\n\n") if b.strip()]
        assert blocks[-1].startswith("event: error\n")
        last = json.loads(blocks[-1].split("data: ", 1)[1])
        assert last["code"] == "idempotency_key_interrupted" and last["sequence_number"] == len(blocks) - 1
        service.gate.set()
        await first
        assert (await post(client, PATH, body, "cut"))[0].status_code == 409 and len(service.submitted) == 1


async def test_store_false_keeps_the_answer_in_the_key(nats_url):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        body = {**BODY, "store": False}
        _, data = await post(client, PATH, body, "plain")
        record = _key_record(runtime, "plain")
        assert record.started.bound == "" and b"".join(record.chunks) == data
        assert (await post(client, PATH, body, "plain"))[1] == data and len(service.submitted) == 1


async def test_a_keyed_buffered_answer_is_the_unkeyed_answer_as_stored(nats_url):
    async with running(nats_url) as rig:
        client, _, _ = rig
        plain = json.loads((await post(client, PATH, BODY))[1])
        keyed = json.loads((await post(client, PATH, BODY, "same"))[1])
        vary = ("id", "created_at", "completed_at", "output")
        assert {k: v for k, v in keyed.items() if k not in vary} == {k: v for k, v in plain.items() if k not in vary}
        assert [o["content"] for o in keyed["output"]] == [o["content"] for o in plain["output"]]
