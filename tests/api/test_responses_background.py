"""Background responses in process: an app with no stored state refuses them precisely (and keeps
serving engine-only requests); during a journal hold (a real nats-server whose stream is full) a
background request answers 429 and stores nothing, while reads and store-less requests go on."""
from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from api.settings import GatewaySettings
from api.stored_access import attach_stored
from aotx.runtime import SharedRuntime
from aotx.stored import Saved, identity_of_key
from eventlog import JournalFull
from tests.api.fake_service import FakeService, make_app
from tests.api.tapes import tape
from tests.shared_api.harness import fresh_spec
from tests.waiting import wait_until_async

MODEL = FakeService.model_id
BODY = {"model": MODEL, "input": "hi"}


def _app(service, port=None):
    app = make_app(service)
    app.config["AOTX_SETTINGS"] = GatewaySettings()
    if port is not None:
        attach_stored(app, port)
    return app


async def test_no_stored_state_refuses_background_and_serves_the_rest():
    client = _app(FakeService()).test_client()
    resp = await client.post("/v1/responses", json={**BODY, "background": True})
    body = await resp.get_json()
    assert resp.status_code == 400 and body["error"]["param"] == "background", body
    assert "no stored state" in body["error"]["message"]
    for path in ("/v1/responses/resp_" + "0" * 48, "/v1/responses/resp_" + "0" * 48 + "?stream=true"):
        resp = await client.get(path)
        assert resp.status_code == 404 and (await resp.get_json())["error"]["type"] == "invalid_request_error"
    resp = await client.post("/v1/responses/resp_" + "0" * 48 + "/cancel")
    assert resp.status_code == 404
    resp = await client.post("/v1/responses", json=BODY)
    assert resp.status_code == 200 and (await resp.get_json())["status"] == "completed"


@contextlib.asynccontextmanager
async def small_runtime(nats_url, max_bytes: int | None = 32 * 1024):
    """(runtime, client): a runtime on a small stream, and an app whose stored port is its own."""
    runtime = await SharedRuntime(nats_url, fresh_spec(max_bytes=max_bytes), progress=False,
                                  probe_interval=0.1).start()
    try:
        yield runtime, _app(FakeService(), runtime.stored).test_client()
    finally:
        await runtime.stop()


async def _fill(runtime) -> None:
    filler = runtime.spec.subject("f" * 32, "filler")
    with pytest.raises(JournalFull):
        for i in range(10_000):
            await runtime.recorder.append(filler, b"x" * 64, msg_id=f"fill-{i}")


async def test_background_during_a_journal_hold_is_429_and_stores_nothing(nats_url):
    async with small_runtime(nats_url) as (runtime, client):
        await _hold_refuses_background(runtime, client)


async def _hold_refuses_background(runtime, client) -> None:
    resp = await client.post("/v1/responses", json={**BODY, "background": True})
    first = await resp.get_json()
    assert resp.status_code == 200 and first["status"] == "queued", first

    async def status():
        return (await (await client.get(f"/v1/responses/{first['id']}")).get_json())["status"]
    await wait_until_async(status, "the first background response to finish", done=lambda s: s == "completed")
    await _fill(runtime)
    before = runtime.projector.stored.totals, (await runtime.recorder.stream_info()).messages
    for body in ({**BODY, "background": True}, {**BODY, "background": True, "stream": True}):
        resp = await client.post("/v1/responses", json=body)
        err = await resp.get_json()
        assert resp.status_code == 429 and err["error"]["code"] == "journal_hold", err
    assert runtime.stored.on_hold()
    assert (runtime.projector.stored.totals, (await runtime.recorder.stream_info()).messages) == before
    # reads keep working: the object and its saved events
    resp = await client.get(f"/v1/responses/{first['id']}")
    assert resp.status_code == 200 and (await resp.get_json())["status"] == "completed"
    resp = await client.get(f"/v1/responses/{first['id']}?stream=true&starting_after=1")
    events = [json.loads(line[6:]) for line in (await resp.get_data(as_text=True)).splitlines()
              if line.startswith("data: ")]
    assert events[0]["sequence_number"] == 2 and events[-1]["type"] == "response.completed"
    # a request that stores nothing is still served
    resp = await client.post("/v1/responses", json={**BODY, "store": False})
    assert resp.status_code == 200 and (await resp.get_json())["status"] == "completed"


class _Yielding(FakeService):
    """Deltas one at a time, the event loop running between them (as the engine's do)."""

    def submit(self, prompt_ids, params, *, surface, lane):
        handle = super().submit(prompt_ids, params, surface=surface, lane=lane)
        deltas = handle._deltas

        async def gen():
            for delta in deltas:
                if handle.cancelled:
                    return
                await asyncio.sleep(0)
                yield delta
        return _Iter(handle, gen)


class _Iter:
    def __init__(self, handle, gen):
        self._handle, self._gen = handle, gen

    def cancel(self):
        self._handle.cancel()

    def __aiter__(self):
        return self._gen()


class _CountingPort:
    """The runtime's stored port, counting the appends a run makes."""

    def __init__(self, port):
        self._port, self.appends = port, []

    def __getattr__(self, name):
        return getattr(self._port, name)

    async def append_events(self, identity, response_id, first, events):
        self.appends.append(len(events))
        return await self._port.append_events(identity, response_id, first, events)


async def test_a_run_saves_its_events_in_batches_numbered_by_position(nats_url):
    async with small_runtime(nats_url, None) as (runtime, _):
        service = _Yielding()
        service.tapes = [tape([f" w{k}" for k in range(300)], finish="length")]
        port = _CountingPort(runtime.stored.journal)
        client = _app(service, port).test_client()
        resp = await client.post("/v1/responses", json={**BODY, "background": True, "stream": True})
        assert resp.status_code == 200
        frames = [json.loads(line[6:]) for line in (await resp.get_data(as_text=True)).splitlines()
                  if line.startswith("data: ")]
        assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
        assert frames[-1]["type"] == "response.incomplete" and len(frames) > 300
        assert sum(port.appends) == len(frames)
        assert len(port.appends) < len(frames) / 4, port.appends   # batched, never one append per token
        text = "".join(f["delta"] for f in frames if f["type"] == "response.output_text.delta")
        assert text == "".join(f" w{k}" for k in range(300))
        final = await (await client.get(f"/v1/responses/{frames[0]['response']['id']}")).get_json()
        assert final["status"] == "incomplete" and final["output"][0]["content"][0]["text"] == text


async def test_off_loopback_another_bearer_token_gets_404(nats_url):
    from api.app import create_app
    from api.settings import token_digest

    tokens = {"alice": "tok-alice-" + "a" * 32, "bob": "tok-bob-" + "b" * 32}
    settings = GatewaySettings(host="10.0.0.1", token_digests={token_digest(t): n for n, t in tokens.items()})
    async with small_runtime(nats_url, None) as (runtime, _):
        app = create_app(FakeService(), settings)
        attach_stored(app, runtime.stored)
        client = app.test_client()
        alice, bob = ({"Authorization": f"Bearer {tokens[n]}"} for n in ("alice", "bob"))
        resp = await client.post("/v1/responses", json={**BODY, "background": True}, headers=alice)
        rid = (await resp.get_json())["id"]
        assert resp.status_code == 200
        for method, path in (("GET", f"/v1/responses/{rid}"), ("GET", f"/v1/responses/{rid}?stream=true"),
                             ("POST", f"/v1/responses/{rid}/cancel")):
            resp = await client.open(path, method=method, headers=bob)
            assert resp.status_code == 404, (method, path, await resp.get_data(as_text=True))
            resp = await client.open(path, method=method)
            assert resp.status_code == 401
        resp = await client.get(f"/v1/responses/{rid}", headers=alice)
        assert resp.status_code == 200 and (await resp.get_json())["id"] == rid


class _Gated(_Yielding):
    """The first `free` deltas at once, the rest once `gate` is set."""

    def __init__(self, free: int):
        super().__init__()
        self.free, self.gate = free, asyncio.Event()

    def submit(self, prompt_ids, params, *, surface, lane):
        handle = FakeService.submit(self, prompt_ids, params, surface=surface, lane=lane)
        deltas = handle._deltas

        async def gen():
            for k, delta in enumerate(deltas):
                if k >= self.free:
                    await self.gate.wait()
                if handle.cancelled:
                    return
                await asyncio.sleep(0)
                yield delta
        return _Iter(handle, gen)


async def test_a_hold_mid_run_delays_its_events_and_loses_none(nats_url):
    async with small_runtime(nats_url) as (runtime, _):
        service = _Gated(free=5)
        service.tapes = [tape([f" w{k}" for k in range(60)], finish="length")]
        client = _app(service, runtime.stored).test_client()
        resp = await client.post("/v1/responses", json={**BODY, "background": True})
        rid = (await resp.get_json())["id"]
        identity = identity_of_key("")   # on loopback with no API key presented

        def saved():
            return runtime.stored.reads.response(identity, rid)
        await wait_until_async(saved, "the first events to be saved", done=lambda v: v.events >= 5)
        await _fill(runtime)
        service.gate.set()   # the rest of the generation, while the journal is full
        await wait_until_async(runtime.stored.on_hold, "the run's next append to meet the hold")
        assert saved().status.wire == "in_progress"
        await runtime.recorder.js.purge_stream(runtime.spec.name, subject=runtime.spec.subject("f" * 32, "filler"))
        done = await wait_until_async(saved, "the run to finish once the hold lifted",
                                      done=lambda v: v.status.terminal)
        assert done.status.wire == "incomplete"
        events = runtime.stored.reads.response_events(identity, rid)
        frames = [json.loads(data.split(b"data: ", 1)[1]) for _, data in events.events]
        assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
        text = "".join(f["delta"] for f in frames if f["type"] == "response.output_text.delta")
        assert text == "".join(f" w{k}" for k in range(60)) == done.output[0]["content"][0]["text"]


async def test_a_reader_of_a_response_deleted_mid_run_ends_cleanly(nats_url):
    from aotx.stored import DeleteResponse

    async with small_runtime(nats_url, None) as (runtime, _):
        service = _Gated(free=5)
        service.tapes = [tape([f" w{k}" for k in range(40)], finish="length")]
        client = _app(service, runtime.stored).test_client()
        rid = (await (await client.post("/v1/responses", json={**BODY, "background": True})).get_json())["id"]
        identity = identity_of_key("")
        await wait_until_async(lambda: runtime.stored.reads.response(identity, rid), "the first events",
                               done=lambda v: v.events >= 5)
        reader = asyncio.ensure_future(client.get(f"/v1/responses/{rid}?stream=true"))
        await wait_until_async(lambda: len(runtime.stored.signals), "the reader to wait for the next event")
        assert isinstance(await runtime.stored.record(identity, DeleteResponse(rid)), Saved)
        resp = await reader
        assert resp.status_code == 200
        frames = [line for line in (await resp.get_data(as_text=True)).splitlines() if line.startswith("data: ")]
        assert len(frames) >= 5
        service.gate.set()   # the run's next append is refused (the response is gone): it stops
        await wait_until_async(lambda: service.handles[0].cancelled, "the run to stop generating")


async def test_a_foreground_stored_response_is_neither_cancelled_nor_streamed_again(nats_url):
    from aotx.stored import CreateResponse

    async with small_runtime(nats_url, None) as (runtime, _):
        client = _app(FakeService(), runtime.stored).test_client()
        rid = "resp_" + "1" * 48
        item = {"id": "msg_" + "2" * 48, "type": "message", "role": "user", "content": "hi"}
        assert isinstance(await runtime.stored.record(identity_of_key(""), CreateResponse(rid, 1, MODEL, [item])),
                          Saved)
        resp = await client.post(f"/v1/responses/{rid}/cancel")
        assert resp.status_code == 400 and (await resp.get_json())["error"]["param"] == "response_id"
        resp = await client.get(f"/v1/responses/{rid}?stream=true")
        assert resp.status_code == 400 and (await resp.get_json())["error"]["param"] == "stream"
        resp = await client.get(f"/v1/responses/{rid}")
        assert resp.status_code == 200 and (await resp.get_json())["status"] == "in_progress"
        assert runtime.stored.reads.response(identity_of_key(""), rid).cancel_requested is False
