"""A stored stream's end: FinishResponse is recorded while the last events go out, and only the terminal
event waits for it (api/surfaces/responses/stored_run.py). The runtime's real stored port, with the
FinishResponse held back until the test lets it through."""
from __future__ import annotations

import asyncio
import json

import pytest

from aotx.stored import FinishResponse, ResponseStatus, identity_of_key
from tests.waiting import wait_until_async

from .conftest import call, sse_events, stored_app

pytestmark = pytest.mark.asyncio(loop_scope="session")
BOUND = 60   # seconds: a bound on a wait that must end, so that the old behaviour fails instead of hanging


class GatedFinish:
    """The stored port, with every FinishResponse waiting for `release`; `finishing` is set once one is asked."""

    def __init__(self, port) -> None:
        self._port, self.release, self.finishing = port, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name):
        return getattr(self._port, name)

    async def record(self, identity, command):
        if isinstance(command, FinishResponse):
            self.finishing.set()
            await self.release.wait()
        return await self._port.record(identity, command)


async def _open_stream(client):
    conn = client.request("/v1/responses", method="POST", headers={"Authorization": "Bearer key-a",
                                                                  "content-type": "application/json"})
    await conn.__aenter__()
    await conn.send(json.dumps({"model": "smollm2-135m-instruct", "input": "hi", "stream": True}).encode())
    await conn.send_complete()
    return conn


async def _read_until(conn, text: str, needle: str) -> str:
    async def more() -> str:
        got = text
        while needle not in got:
            got += (await conn.receive()).decode()
        return got
    return await asyncio.wait_for(more(), BOUND)


def _status(runtime, response_id: str):
    return runtime.stored.reads.response(identity_of_key("key-a"), response_id).status


async def test_the_last_events_go_out_while_the_finish_is_recorded_and_the_terminal_one_waits(service, runtime):
    port = GatedFinish(runtime.stored.journal)
    client = stored_app(service, port).test_client()
    conn = await _open_stream(client)
    text = await _read_until(conn, "", "response.output_item.done")   # before the old code let it through
    await asyncio.wait_for(port.finishing.wait(), BOUND)
    assert "response.completed" not in text
    response_id = sse_events(text)[0]["response"]["id"]
    assert _status(runtime, response_id) is ResponseStatus.IN_PROGRESS
    port.release.set()
    text = await _read_until(conn, text, "response.completed")
    assert _status(runtime, response_id) is ResponseStatus.COMPLETED   # stored before the terminal event
    kinds = [e["type"] for e in sse_events(text)]
    assert kinds[-1] == "response.completed" and kinds.count("response.completed") == 1
    assert [e["sequence_number"] for e in sse_events(text)] == list(range(len(kinds)))
    await conn.__aexit__(None, None, None)
    status, got = await call(client, "GET", f"/v1/responses/{response_id}")
    assert status == 200 and got["status"] == "completed"


async def test_a_client_that_leaves_while_the_terminal_event_waits_leaves_it_completed(service, runtime):
    port = GatedFinish(runtime.stored.journal)
    client = stored_app(service, port).test_client()
    conn = await _open_stream(client)
    text = await _read_until(conn, "", "response.output_item.done")
    await asyncio.wait_for(port.finishing.wait(), BOUND)
    response_id = sse_events(text)[0]["response"]["id"]
    await conn.disconnect()
    await conn.__aexit__(None, None, None)
    port.release.set()
    await wait_until_async(lambda: _status(runtime, response_id), "the response to be finished in the store",
                           done=lambda s: s is not ResponseStatus.IN_PROGRESS)
    view = runtime.stored.reads.response(identity_of_key("key-a"), response_id)
    assert view.status is ResponseStatus.COMPLETED and view.error is None
