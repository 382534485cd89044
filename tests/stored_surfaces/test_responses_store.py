"""Stored responses through the real /v1/responses routes: store (default true), retrieve, delete,
input_items paging, previous_response_id chains (tool round trip, what the engine was asked, truncation),
foreign and bad ids, metadata bounds, journal hold, a client that leaves mid-stream, an app without a port."""
from __future__ import annotations

import asyncio
import json

import pytest

from aotx.runtime import SharedRuntime
from aotx.stored import ResponseStatus
from eventlog import JournalFull, StreamSpec
from tests.api.fake_service import FakeHandle
from tests.api.tapes import CALL, tape
from tests.waiting import wait_until_async

from .conftest import B, call, openai_error, sse_events, stored_app

pytestmark = pytest.mark.asyncio(loop_scope="session")
MODEL = "smollm2-135m-instruct"
TOOL = {"type": "function", "name": "get_weather", "description": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def ask(**kw) -> dict:
    return {"model": MODEL, "input": "hi", **kw}


def stored_count(runtime) -> int:
    return runtime.projector.stored.totals.responses


async def test_store_defaults_true_retrieve_answers_the_same_object_then_delete(client, runtime):
    status, made = await call(client, "POST", "/v1/responses", ask(metadata={"k": "v"}, instructions="brief"))
    assert status == 200 and made["store"] is True and made["status"] == "completed"
    assert made["previous_response_id"] is None and made["conversation"] is None
    status, got = await call(client, "GET", f"/v1/responses/{made['id']}")
    assert status == 200
    assert got == made
    assert await call(client, "DELETE", f"/v1/responses/{made['id']}") == (
        200, {"id": made["id"], "object": "response", "deleted": True})
    openai_error(await call(client, "GET", f"/v1/responses/{made['id']}"), 404)
    openai_error(await call(client, "DELETE", f"/v1/responses/{made['id']}"), 404)
    assert stored_count(runtime) == 0


async def test_store_false_keeps_nothing(client, runtime):
    status, made = await call(client, "POST", "/v1/responses", ask(store=False))
    assert status == 200 and made["store"] is False
    openai_error(await call(client, "GET", f"/v1/responses/{made['id']}"), 404)
    assert not runtime.projector.stored.books


async def test_a_stream_is_finished_in_the_store_before_its_terminal_event(client, runtime):
    conn = client.request("/v1/responses", method="POST", headers={"Authorization": "Bearer key-a",
                                                                  "content-type": "application/json"})
    await conn.__aenter__()
    await conn.send(json.dumps(ask(stream=True)).encode())
    await conn.send_complete()
    text = ""
    while "response.completed" not in text:
        text += (await conn.receive()).decode()
    # the terminal event has arrived (the stream itself may not have ended yet): the store has the end
    final = next(e for e in sse_events(text) if e["type"] == "response.completed")["response"]
    status, got = await call(client, "GET", f"/v1/responses/{final['id']}")
    assert final["store"] is True and status == 200
    assert (got["status"], got["output"], got["usage"]) == ("completed", final["output"], final["usage"])
    await conn.__aexit__(None, None, None)


async def test_input_items_page_both_ways(client):
    items = [{"role": "user", "content": f"m{k}"} for k in range(5)]
    _, made = await call(client, "POST", "/v1/responses", ask(input=items))
    base = f"/v1/responses/{made['id']}/input_items"
    status, first = await call(client, "GET", f"{base}?order=asc&limit=2")
    assert status == 200 and first["object"] == "list" and first["has_more"] is True
    assert [i["content"][0]["text"] for i in first["data"]] == ["m0", "m1"]
    assert first["data"][0]["type"] == "message" and first["data"][0]["id"].startswith("msg_")
    _, rest = await call(client, "GET", f"{base}?order=asc&limit=100&after={first['last_id']}")
    assert [i["content"][0]["text"] for i in rest["data"]] == ["m2", "m3", "m4"] and rest["has_more"] is False
    _, desc = await call(client, "GET", base)
    assert [i["content"][0]["text"] for i in desc["data"]] == ["m4", "m3", "m2", "m1", "m0"]
    assert (desc["first_id"], desc["last_id"]) == (desc["data"][0]["id"], desc["data"][-1]["id"])
    for query, param in (("limit=0", "limit"), ("limit=101", "limit"), ("limit=x", "limit"),
                         ("order=up", "order"), ("after=msg_nope", "after")):
        openai_error(await call(client, "GET", f"{base}?{query}"), 400, param)


async def test_previous_response_id_carries_the_tool_round_trip_and_not_the_instructions(client, service, runtime):
    service.tapes = [tape([CALL]), tape(["Sunny", " it is"])]
    _, first = await call(client, "POST", "/v1/responses", ask(input="weather in Paris?", tools=[TOOL],
                                                               instructions="Be terse."))
    fc = first["output"][0]
    assert fc["type"] == "function_call" and fc["name"] == "get_weather"
    out = {"type": "function_call_output", "call_id": fc["call_id"], "output": "sunny, 21C"}
    status, second = await call(client, "POST", "/v1/responses", ask(input=[out], tools=[TOOL],
                                                                      previous_response_id=first["id"]))
    assert status == 200 and second["previous_response_id"] == first["id"]
    messages = service.chat_calls[-1][0]
    assert [(m.role, m.content) for m in messages] == [
        ("user", "weather in Paris?"), ("assistant", ""), ("tool", "sunny, 21C")]
    assert messages[1].tool_calls[0].name == "get_weather" and messages[2].name == "get_weather"
    # the third continues the whole chain: both earlier inputs and outputs, in order
    await call(client, "POST", "/v1/responses", ask(input="thanks", previous_response_id=second["id"]))
    assert [(m.role, m.content) for m in service.chat_calls[-1][0]] == [
        ("user", "weather in Paris?"), ("assistant", ""), ("tool", "sunny, 21C"),
        ("assistant", "Sunny it is"), ("user", "thanks")]
    _, items = await call(client, "GET", f"/v1/responses/{second['id']}/input_items")
    assert [i["type"] for i in items["data"]] == ["function_call_output"]


async def test_unknown_deleted_foreign_and_malformed_previous_ids_are_404_and_store_nothing(client, service, runtime):
    _, mine = await call(client, "POST", "/v1/responses", ask())
    _, gone = await call(client, "POST", "/v1/responses", ask())
    await call(client, "DELETE", f"/v1/responses/{gone['id']}")
    before, submitted = stored_count(runtime), len(service.submitted)
    for previous, headers in ((gone["id"], None), ("resp_" + "0" * 48, None), ("nope", None), (mine["id"], B)):
        got = await call(client, "POST", "/v1/responses", ask(previous_response_id=previous),
                         **({"headers": headers} if headers else {}))
        assert openai_error(got, 404, "previous_response_id")["type"] == "invalid_request_error"
    assert (stored_count(runtime), len(service.submitted)) == (before, submitted)
    for method, path in (("GET", ""), ("DELETE", ""), ("GET", "/input_items")):
        openai_error(await call(client, method, f"/v1/responses/{mine['id']}{path}", headers=B), 404)
    assert (await call(client, "GET", f"/v1/responses/{mine['id']}"))[0] == 200


async def test_a_chain_over_the_context_is_refused_or_truncated_oldest_first(client, service):
    _, r1 = await call(client, "POST", "/v1/responses", ask(input="a" * 150))
    _, r2 = await call(client, "POST", "/v1/responses", ask(input="b" * 150, previous_response_id=r1["id"]))
    submitted = len(service.submitted)
    got = await call(client, "POST", "/v1/responses", ask(input="c" * 150, previous_response_id=r2["id"]))
    assert "truncation" in openai_error(got, 400, "previous_response_id")["message"]
    assert len(service.submitted) == submitted
    status, r3 = await call(client, "POST", "/v1/responses", ask(input="c" * 150, previous_response_id=r2["id"],
                                                                 truncation="auto"))
    assert status == 200 and r3["truncation"] == "auto"
    contents = [m.content for m in service.chat_calls[-1][0]]
    assert contents[-1] == "c" * 150 and "a" * 150 not in contents and "b" * 150 in contents


@pytest.mark.parametrize("metadata,param", [
    ({f"k{i}": "v" for i in range(17)}, "metadata"), ({"k" * 65: "v"}, "metadata"),
    ({"k": "v" * 513}, "metadata.k"), ({"k": 1}, "metadata.k"), ([], "metadata"),
    ({"k": "x" * (10 << 20)}, "metadata.k")])
async def test_metadata_past_openai_bounds_is_400_and_stores_nothing(client, service, runtime, metadata, param):
    openai_error(await call(client, "POST", "/v1/responses", ask(metadata=metadata)), 400, param)
    assert stored_count(runtime) == 0 and service.submitted == []


async def test_during_a_hold_store_true_is_429_store_false_served_reads_work(nats_url, service):
    spec = StreamSpec(name="SSURF_HOLD", subject_prefix="ssurfhold.j", max_bytes=16 * 1024)
    runtime = await SharedRuntime(nats_url, spec, progress=False).start()
    try:
        client = stored_app(service, runtime.stored).test_client()
        _, kept = await call(client, "POST", "/v1/responses", ask())
        with pytest.raises(JournalFull):     # another tenant of the stream fills it up
            for i in range(10_000):
                await runtime.recorder.append(spec.subject("f" * 32, "filler"), b"x" * 64, msg_id=f"fill-{i}")
        submitted, books = len(service.submitted), runtime.projector.stored.totals
        for _ in range(2):                   # the hold begins, then is predicted from the stream's room
            err = openai_error(await call(client, "POST", "/v1/responses", ask()), 429)
            assert err["code"] == "journal_hold" and "hold" in err["message"]
        assert openai_error(await call(client, "POST", "/v1/conversations", {}), 429)
        # the first (whose create discovered the hold) was asked of the engine while its create was in flight,
        # and cancelled when it was refused; the second, on a hold already known, was never asked
        assert len(service.submitted) == submitted + 1 and service.handles[-1].cancelled
        assert runtime.projector.stored.totals == books
        status, served = await call(client, "POST", "/v1/responses", ask(store=False))
        assert status == 200 and served["store"] is False
        assert (await call(client, "GET", f"/v1/responses/{kept['id']}"))[0] == 200
        assert (await call(client, "GET", f"/v1/responses/{kept['id']}/input_items"))[0] == 200
    finally:
        await runtime.stop()


class StallingHandle(FakeHandle):
    """One delta, then nothing until cancelled: a generation the client leaves in the middle."""

    async def _gen(self):
        yield self._deltas[0]
        await asyncio.Event().wait()


async def test_a_client_that_leaves_mid_stream_leaves_a_failed_response(client, service, runtime):
    service.submit = lambda prompt_ids, params, **kw: StallingHandle(tape(["partial"]), len(prompt_ids))
    conn = client.request("/v1/responses", method="POST", headers={"Authorization": "Bearer key-a",
                                                                  "content-type": "application/json"})
    await conn.__aenter__()
    await conn.send(json.dumps(ask(stream=True)).encode())
    await conn.send_complete()
    first = (await conn.receive()).decode()
    response_id = sse_events(first)[0]["response"]["id"]
    await conn.disconnect()
    await conn.__aexit__(None, None, None)
    view = await wait_until_async(lambda: runtime.stored.reads.response(runtime_identity(), response_id),
                                  "the cut stream to be finished in the store",
                                  done=lambda v: getattr(v, "status", None) is ResponseStatus.FAILED)
    assert view.error["code"] == "client_disconnected"


def runtime_identity() -> str:
    from aotx.stored import identity_of_key
    return identity_of_key("key-a")


async def test_an_app_without_a_stored_port_stores_nothing_and_says_so(service):
    client = stored_app(service, None).test_client()
    status, made = await call(client, "POST", "/v1/responses", ask())
    assert status == 200 and made["store"] is False
    for extra, param in (({"store": True}, "store"), ({"previous_response_id": "resp_" + "0" * 24},
                                                      "previous_response_id"),
                         ({"conversation": "conv_" + "0" * 24}, "conversation")):
        err = openai_error(await call(client, "POST", "/v1/responses", ask(**extra)), 400, param)
        assert err["code"] == "store_unavailable"
    openai_error(await call(client, "GET", f"/v1/responses/{made['id']}"), 404)
    assert openai_error(await call(client, "POST", "/v1/conversations", {}), 400)["code"] == "store_unavailable"
