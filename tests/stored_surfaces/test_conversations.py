"""The Conversations API through the real routes: create / retrieve / update / delete, items list (both
orders) / add / retrieve / delete, a response with `conversation` (its context, then its items appended),
foreign ids, bad input that stores nothing."""
from __future__ import annotations

import pytest

from tests.api.tapes import tape

from .conftest import B, call, openai_error

pytestmark = pytest.mark.asyncio(loop_scope="session")
MODEL = "smollm2-135m-instruct"


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


async def test_conversation_and_its_items_round_trip(client, runtime):
    status, conv = await call(client, "POST", "/v1/conversations",
                              {"items": [user("one"), user("two")], "metadata": {"topic": "demo"}})
    assert status == 200 and conv["object"] == "conversation" and conv["id"].startswith("conv_")
    assert conv["metadata"] == {"topic": "demo"} and isinstance(conv["created_at"], int)
    base = f"/v1/conversations/{conv['id']}"
    assert await call(client, "GET", base) == (200, conv)
    status, updated = await call(client, "POST", base, {"metadata": {"topic": "changed"}})
    assert status == 200 and updated["metadata"] == {"topic": "changed"}
    status, added = await call(client, "POST", f"{base}/items", {"items": [user("three")]})
    assert status == 200 and added["object"] == "list" and len(added["data"]) == 1 and not added["has_more"]
    three = added["data"][0]
    assert three["content"] == [{"type": "input_text", "text": "three"}] and three["status"] == "completed"
    _, desc = await call(client, "GET", f"{base}/items")
    assert [i["content"][0]["text"] for i in desc["data"]] == ["three", "two", "one"]
    _, asc = await call(client, "GET", f"{base}/items?order=asc&limit=2")
    assert [i["content"][0]["text"] for i in asc["data"]] == ["one", "two"] and asc["has_more"]
    _, tail = await call(client, "GET", f"{base}/items?order=asc&after={asc['last_id']}")
    assert [i["id"] for i in tail["data"]] == [three["id"]] and not tail["has_more"]
    assert await call(client, "GET", f"{base}/items/{three['id']}") == (200, three)
    status, after_delete = await call(client, "DELETE", f"{base}/items/{three['id']}")
    assert status == 200 and after_delete["object"] == "conversation" and after_delete["id"] == conv["id"]
    openai_error(await call(client, "GET", f"{base}/items/{three['id']}"), 404, "item_id")
    assert await call(client, "DELETE", base) == (200, {"id": conv["id"], "object": "conversation.deleted",
                                                        "deleted": True})
    for method, path in (("GET", ""), ("GET", "/items"), ("DELETE", ""), ("POST", "/items")):
        openai_error(await call(client, method, base + path, {"items": [user("x")]}), 404)
    assert runtime.projector.stored.totals.conversations == 0


async def test_a_response_with_conversation_sees_its_items_and_is_appended(client, service):
    _, conv = await call(client, "POST", "/v1/conversations", {"items": [user("my name is Ada")]})
    service.tapes = [tape(["Hello", " Ada"])]
    status, resp = await call(client, "POST", "/v1/responses", {"model": MODEL, "input": "who am I?",
                                                                "conversation": conv["id"]})
    assert status == 200 and resp["conversation"] == {"id": conv["id"]} and resp["store"] is True
    assert [(m.role, m.content) for m in service.chat_calls[-1][0]] == [("user", "my name is Ada"),
                                                                        ("user", "who am I?")]
    _, items = await call(client, "GET", f"/v1/conversations/{conv['id']}/items?order=asc")
    assert [(i["type"], i.get("role")) for i in items["data"]] == [("message", "user"), ("message", "user"),
                                                                   ("message", "assistant")]
    assert items["data"][2] == resp["output"][0]
    # the object form of `conversation` is taken too, and the next turn sees all of it
    await call(client, "POST", "/v1/responses", {"model": MODEL, "input": "again", "conversation": {"id": conv["id"]}})
    assert [m.content for m in service.chat_calls[-1][0]] == ["my name is Ada", "who am I?", "Hello Ada", "again"]


async def test_conversation_refusals_store_nothing(client, service, runtime):
    _, conv = await call(client, "POST", "/v1/conversations", {})
    _, resp = await call(client, "POST", "/v1/responses", {"model": MODEL, "input": "hi"})
    before, submitted = runtime.projector.stored.totals, len(service.submitted)
    cases = [
        ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "conversation": conv["id"],
                                   "previous_response_id": resp["id"]}, 400, "conversation"),
        ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "conversation": conv["id"], "store": False},
         400, "store"),
        ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "conversation": "conv_" + "0" * 24}, 404,
         "conversation"),
        ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "conversation": 7}, 400, "conversation"),
        ("POST", "/v1/conversations", {"items": [user("x")] * 21}, 400, "items"),
        ("POST", "/v1/conversations", {"items": [{"type": "bogus"}]}, 400, "items[0].type"),
        ("POST", "/v1/conversations", {"items": "text"}, 400, "items"),
        ("POST", "/v1/conversations", {"metadata": {f"k{i}": "v" for i in range(17)}}, 400, "metadata"),
        ("POST", "/v1/conversations", {"metadata": {"k": "x" * (10 << 20)}}, 400, "metadata.k"),
        ("POST", f"/v1/conversations/{conv['id']}", {}, 400, "metadata"),
        ("POST", f"/v1/conversations/{conv['id']}/items", {"items": []}, 400, "items"),
        ("GET", f"/v1/conversations/{conv['id']}/items?limit=0", None, 400, "limit"),
        ("GET", f"/v1/conversations/{conv['id']}/items?after=msg_unknown", None, 400, "after"),
        ("GET", f"/v1/conversations/{conv['id']}/items?order=sideways", None, 400, "order"),
        ("GET", "/v1/conversations/not-an-id", None, 404, None),
    ]
    for method, path, body, status, param in cases:
        openai_error(await call(client, method, path, body), status, param)
    assert (runtime.projector.stored.totals, len(service.submitted)) == (before, submitted)


async def test_another_callers_conversation_is_404_everywhere(client, service, runtime):
    _, conv = await call(client, "POST", "/v1/conversations", {"items": [user("secret")]})
    item = (await call(client, "GET", f"/v1/conversations/{conv['id']}/items"))[1]["data"][0]
    base = f"/v1/conversations/{conv['id']}"
    for method, path, body in (("GET", "", None), ("POST", "", {"metadata": {}}), ("DELETE", "", None),
                               ("GET", "/items", None), ("POST", "/items", {"items": [user("x")]}),
                               ("GET", f"/items/{item['id']}", None), ("DELETE", f"/items/{item['id']}", None)):
        openai_error(await call(client, method, base + path, body, headers=B), 404)
    openai_error(await call(client, "POST", "/v1/responses", {"model": MODEL, "input": "hi",
                                                             "conversation": conv["id"]}, headers=B), 404)
    assert (await call(client, "GET", f"{base}/items/{item['id']}"))[1] == item


@pytest.mark.parametrize("path,body,param", [
    ("/v1/conversations", {"items": [{"role": []}]}, "items[0].role"),
    ("/v1/responses", {"model": MODEL, "input": [{"role": {"a": 1}, "content": "x"}]}, "input[0].role")])
async def test_an_unhashable_role_is_a_400_naming_it(client, runtime, path, body, param):
    openai_error(await call(client, "POST", path, body), 400, param)
    assert not runtime.projector.stored.books
