"""Background responses in process: an app with no stored state refuses them precisely (and keeps
serving engine-only requests); during a journal hold (a real nats-server whose stream is full) a
background request answers 429 and stores nothing, while reads and store-less requests go on."""
from __future__ import annotations

import contextlib
import json

import pytest

from api.settings import GatewaySettings
from api.stored_access import attach_stored
from aotx.runtime import SharedRuntime
from eventlog import JournalFull
from tests.api.fake_service import FakeService, make_app
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
async def small_runtime(nats_url):
    """(runtime, client): a runtime on a small stream, and an app whose stored port is its own."""
    runtime = await SharedRuntime(nats_url, fresh_spec(max_bytes=32 * 1024), progress=False,
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
