"""Idempotency-Key through the real blueprints over a tape-replaying service and a real runtime's stored port
(a real nats-server): replays byte for byte, one generation for concurrent duplicates, refusals in each
surface's envelope, nothing recorded for refused input, a first attempt saved when its client went away."""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json

import pytest

from aotx.runtime import SharedRuntime
from aotx.stored import FinishKey, KeyEnd, KeyState, StoredLimits, identity_of_key
from api.idempotency.header import body_digest
from api.settings import GatewaySettings
from api.stored_access import attach_stored
from eventlog import StreamSpec
from tests.api.fake_service import FakeService, make_app
from tests.waiting import wait_until_async

MODEL = FakeService.model_id
USER = [{"role": "user", "content": "hi"}]
BODIES = {
    "chat.completions": ("/v1/chat/completions", {"model": MODEL, "messages": USER}),
    "completions": ("/v1/completions", {"model": MODEL, "prompt": "hi"}),
    "messages": ("/v1/messages", {"model": MODEL, "messages": USER, "max_tokens": 16}),
    "responses": ("/v1/responses", {"model": MODEL, "input": "hi"}),
}
REPLAYED = "Idempotent-Replayed"
_names = itertools.count()


class GatedService(FakeService):
    """A FakeService whose generations wait for `gate` before their first delta (a first attempt that runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()

    def submit(self, prompt_ids, params, *, surface, lane):
        handle = super().submit(prompt_ids, params, surface=surface, lane=lane)
        gate, inner = self.gate, handle._gen

        async def gated():
            await gate.wait()
            async for delta in inner():
                yield delta
        handle._gen = gated
        return handle


@contextlib.asynccontextmanager
async def running(nats_url, **runtime_kw):
    n = next(_names)
    runtime = SharedRuntime(nats_url, StreamSpec(name=f"IDEM{n}", subject_prefix=f"idem{n}.j"), progress=False,
                            **runtime_kw)
    await runtime.start()
    service = GatedService()
    app = make_app(service)
    app.config["AOTX_SETTINGS"] = GatewaySettings()
    attach_stored(app, runtime.stored)
    try:
        yield app.test_client(), service, runtime
    finally:
        await runtime.stop()


async def post(client, path, body, key=None, api_key="sk-a", **headers):
    if key is not None:
        headers["Idempotency-Key"] = key
    r = await client.post(path, json=body, headers={"Authorization": f"Bearer {api_key}", **headers})
    return r, await r.get_data()


@pytest.mark.parametrize("surface", sorted(BODIES))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_repeat_gets_the_saved_answer_byte_for_byte_and_runs_once(nats_url, surface, stream):
    async with running(nats_url) as rig:
        client, service, _ = rig
        path, body = BODIES[surface]
        body = {**body, "stream": stream}
        first, data = await post(client, path, body, "k-1")
        assert first.status_code == 200 and REPLAYED not in first.headers
        again, data2 = await post(client, path, body, "k-1")
        assert again.status_code == 200 and again.headers[REPLAYED] == "true"
        assert data2 == data and again.headers["Content-Type"] == first.headers["Content-Type"]
        reordered = dict(reversed(list(body.items())))            # the same JSON value: the same request
        assert (await post(client, path, reordered, '"k-1"'))[1] == data   # and the key as an sf-string
        assert len(service.submitted) == 1
        other, err = await post(client, path, {**body, "temperature": 0.5}, "k-1")
        assert other.status_code == 422
        envelope = json.loads(err)
        if surface == "messages":
            assert envelope["type"] == "error" and envelope["error"]["type"] == "invalid_request_error"
        else:
            assert envelope["error"]["param"] == "Idempotency-Key" and envelope["error"]["code"] == "idempotency_key_reused"
        fresh, _ = await post(client, path, body, "k-1", api_key="sk-other")   # keys belong to their caller
        assert fresh.status_code == 200 and REPLAYED not in fresh.headers and len(service.submitted) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_concurrent_duplicates_share_one_generation(nats_url, stream):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        path, body = BODIES["chat.completions"]
        body = {**body, "stream": stream}
        service.gate.clear()
        first = asyncio.ensure_future(post(client, path, body, "dup"))
        await wait_until_async(lambda: len(service.submitted), "the first attempt to reach the engine")
        second = asyncio.ensure_future(post(client, path, body, "dup"))
        await wait_until_async(lambda: len(runtime.stored.signals), "the repeat to follow the first attempt")
        service.gate.set()
        (r1, d1), (r2, d2) = await asyncio.gather(first, second)
        assert d1 == d2 and r1.status_code == r2.status_code == 200
        assert REPLAYED not in r1.headers and r2.headers[REPLAYED] == "true"
        assert len(service.submitted) == 1


async def test_a_first_attempt_whose_client_left_is_saved_whole(nats_url):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        path, body = BODIES["responses"]
        body = {**body, "stream": True}
        service.gate.clear()
        gone = asyncio.ensure_future(post(client, path, body, "left"))
        await wait_until_async(lambda: len(service.submitted), "the first attempt to reach the engine")
        gone.cancel()
        service.gate.set()
        identity, digest = identity_of_key("sk-a"), body_digest(body)
        await wait_until_async(lambda: runtime.stored.reads.key(identity, "responses", "left", digest).state,
                               "the first attempt to finish", done=lambda s: s is KeyState.FINISHED)
        again, data = await post(client, path, body, "left")
        assert again.headers[REPLAYED] == "true" and b"response.completed" in data
        assert len(service.submitted) == 1


async def test_refused_input_records_nothing_and_a_refused_run_frees_its_key(nats_url):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        path, body = BODIES["chat.completions"]
        bad, _ = await post(client, path, {**body, "temperature": "hot"}, "k")
        assert bad.status_code == 400
        assert runtime.stored.reads.state.books == {}             # validation failed: no key record at all
        service.reject = ("queue_full", "busy")
        busy, _ = await post(client, path, body, "k")
        assert busy.status_code == 429                            # refused by the engine after admission: released
        service.reject = None
        ok, data = await post(client, path, {**body, "max_tokens": 8}, "k")   # any body: the key is free again
        assert ok.status_code == 200 and REPLAYED not in ok.headers
        assert (await post(client, path, {**body, "max_tokens": 8}, "k"))[1] == data


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", '"unterminated'])
async def test_a_malformed_key_is_a_400_naming_the_header(nats_url, key):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        for surface, (path, body) in BODIES.items():
            r, data = await post(client, path, body, key)
            assert r.status_code == 400, (surface, data)
            err = json.loads(data)
            if surface == "messages":
                assert err["type"] == "error" and "Idempotency-Key" in err["error"]["message"]
            else:
                assert err["error"]["param"] == "Idempotency-Key" and err["error"]["code"] == "invalid_idempotency_key"
        assert service.submitted == [] and runtime.stored.reads.state.books == {}


async def test_an_interrupted_first_attempt_is_a_409_and_never_runs_again(nats_url):
    async with running(nats_url) as rig:
        client, service, runtime = rig
        path, body = BODIES["messages"]
        service.gate.clear()
        cut = asyncio.ensure_future(post(client, path, body, "cut"))
        await wait_until_async(lambda: len(service.submitted), "the first attempt to reach the engine")
        # what a boot journals for a key the previous run left unfinished (aotx.stored.recovery)
        await runtime.stored.record(identity_of_key("sk-a"), FinishKey("messages", "cut", 503, {}, KeyEnd.INTERRUPTED))
        for _ in range(2):
            r, data = await post(client, path, body, "cut")
            err = json.loads(data)
            assert r.status_code == 409 and err["type"] == "error" and "interrupted" in err["error"]["message"]
        cut.cancel()
        service.gate.set()
        assert len(service.submitted) == 1


async def test_without_a_stored_port_a_key_is_a_precise_400_and_no_key_is_served():
    service = FakeService()
    app = make_app(service)
    app.config["AOTX_SETTINGS"] = GatewaySettings()
    client = app.test_client()
    path, body = BODIES["chat.completions"]
    r, data = await post(client, path, body, "k")
    assert r.status_code == 400 and json.loads(data)["error"]["code"] == "idempotency_unavailable"
    assert (await post(client, path, body))[0].status_code == 200


async def test_a_finished_answer_is_replayed_for_the_retention_then_the_key_runs_afresh(nats_url):
    now = [1_800_000_000.0]
    async with running(nats_url, stored_limits=StoredLimits(idempotency_ttl=60), clock=lambda: now[0]) as rig:
        client, service, _ = rig
        path, body = BODIES["completions"]
        assert (await post(client, path, body, "ttl"))[0].status_code == 200
        now[0] += 59
        assert (await post(client, path, body, "ttl"))[0].headers[REPLAYED] == "true"
        now[0] += 1                                   # past --idempotency-ttl: the key reads as absent
        fresh, _ = await post(client, path, {**body, "max_tokens": 4}, "ttl")
        assert fresh.status_code == 200 and REPLAYED not in fresh.headers and len(service.submitted) == 2


async def test_a_full_key_table_is_a_native_400_and_the_request_does_not_run(nats_url):
    async with running(nats_url, stored_limits=StoredLimits(keys=1)) as rig:
        client, service, runtime = rig
        path, body = BODIES["chat.completions"]
        first, _ = await post(client, path, body, "one")
        assert first.status_code == 200
        for surface, (path, body) in BODIES.items():
            r, data = await post(client, path, body, "two")
            assert r.status_code == 400, (surface, r.status_code, data)      # never a 5xx (it was 507)
            err = json.loads(data)
            text = err["error"]["message"]
            assert "full" in text, err
        assert len(service.submitted) == 1
