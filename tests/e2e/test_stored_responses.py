"""Stored responses and the Conversations API through the official openai SDK against `aotx serve` (the real
model): create / retrieve / delete, input_items paging, a previous_response_id chain with a function tool
round trip, conversations and their items, a response appended to a conversation, another API key's 404,
store: false, and kill -9 of the server then retrieve."""
from __future__ import annotations

import os
import signal

import openai
import pytest

from tests.server_process import ServerProcess

MODEL = "smollm2-135m-instruct"
TOOL = {"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def other_client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="another-key", max_retries=0, timeout=120)


def test_create_retrieve_input_items_delete(openai_client, other_client):
    items = [{"role": "user", "content": f"Say the word {w}."} for w in ("one", "two", "three")]
    r = openai_client.responses.create(model=MODEL, input=items, max_output_tokens=4, metadata={"run": "e2e"})
    assert r.store is True and r.metadata == {"run": "e2e"}
    got = openai_client.responses.retrieve(r.id)
    assert (got.id, got.status, got.output_text, got.usage, got.metadata) == (
        r.id, r.status, r.output_text, r.usage, r.metadata)
    asc = list(openai_client.responses.input_items.list(r.id, order="asc", limit=2))   # pages through
    assert [i.content[0].text for i in asc] == [i["content"] for i in items]
    page = openai_client.responses.input_items.list(r.id, limit=2)
    assert page.has_more and [i.content[0].text for i in page.data] == ["Say the word three.", "Say the word two."]
    assert [i.id for i in openai_client.responses.input_items.list(r.id)] == [i.id for i in reversed(asc)]
    with pytest.raises(openai.NotFoundError):
        other_client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        other_client.responses.delete(r.id)
    with pytest.raises(openai.BadRequestError):
        openai_client.responses.input_items.list(r.id, limit=101)
    openai_client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(r.id)
    plain = openai_client.responses.create(model=MODEL, input="hi", max_output_tokens=2, store=False)
    assert plain.store is False
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(plain.id)


def test_previous_response_id_chain_with_a_function_tool_round_trip(openai_client, other_client):
    first = openai_client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[TOOL],
                                           tool_choice="required", temperature=0, max_output_tokens=64)
    call = next(o for o in first.output if o.type == "function_call")
    kept = openai_client.responses.retrieve(first.id).output
    assert [o.call_id for o in kept if o.type == "function_call"][0] == call.call_id
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 degrees."}
    with openai_client.responses.stream(model=MODEL, input=[output], tools=[TOOL], previous_response_id=first.id,
                                        temperature=0, max_output_tokens=8) as stream:
        # the final event: response.completed, or response.incomplete where the 8 tokens cut it
        second = [e for e in stream if e.type in ("response.completed", "response.incomplete")][-1].response
    assert second.previous_response_id == first.id and second.store is True
    # the model saw the first turn (its input and its function call) before the tool's output
    assert second.usage.input_tokens > first.usage.input_tokens + 10
    assert openai_client.responses.retrieve(second.id).status == second.status
    [only] = openai_client.responses.input_items.list(second.id)
    assert only.type == "function_call_output" and only.call_id == call.call_id
    with pytest.raises(openai.NotFoundError):
        other_client.responses.create(model=MODEL, input="hi", previous_response_id=second.id)
    with pytest.raises(openai.NotFoundError) as exc:
        openai_client.responses.create(model=MODEL, input="hi", previous_response_id="resp_" + "0" * 24)
    assert "previous_response_id" in str(exc.value.body)


def test_conversations_and_a_response_appended_to_one(openai_client, other_client):
    conv = openai_client.conversations.create(items=[{"type": "message", "role": "user", "content": "My name is Ada."}],
                                              metadata={"topic": "names"})
    assert openai_client.conversations.retrieve(conv.id).metadata == {"topic": "names"}
    assert openai_client.conversations.update(conv.id, metadata={"topic": "people"}).metadata == {"topic": "people"}
    added = openai_client.conversations.items.create(conv.id, items=[
        {"type": "message", "role": "user", "content": "I live in Paris."}])
    assert len(added.data) == 1
    item = openai_client.conversations.items.retrieve(added.data[0].id, conversation_id=conv.id)
    assert item.content[0].text == "I live in Paris."
    r = openai_client.responses.create(model=MODEL, input="What is my name?", conversation=conv.id,
                                       max_output_tokens=6)
    assert r.conversation.id == conv.id
    items = list(openai_client.conversations.items.list(conv.id, order="asc", limit=2))
    assert [i.type for i in items] == ["message"] * 4 and items[-1].id == r.output[0].id
    assert items[2].content[0].text == "What is my name?"
    assert openai_client.conversations.items.delete(item.id, conversation_id=conv.id).id == conv.id
    assert len(list(openai_client.conversations.items.list(conv.id))) == 3
    with pytest.raises(openai.NotFoundError):
        other_client.conversations.retrieve(conv.id)
    with pytest.raises(openai.BadRequestError):
        openai_client.responses.create(model=MODEL, input="x", conversation=conv.id, previous_response_id=r.id)
    assert openai_client.conversations.delete(conv.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        openai_client.conversations.retrieve(conv.id)


def test_stored_state_survives_kill_9(tmp_path):
    args = ("--max-batch", "4", "--kv-pages", "64", "--default-max-tokens", "4")
    first = ServerProcess(*args, var=tmp_path / "var").start()
    try:
        client = openai.OpenAI(base_url=f"{first.base_url}/v1", api_key="k", max_retries=0, timeout=120)
        r = client.responses.create(model=MODEL, input="hi", max_output_tokens=3)
        conv = client.conversations.create(items=[{"type": "message", "role": "user", "content": "kept"}])
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait()
    finally:
        first.stop()
    second = ServerProcess(*args, var=tmp_path / "var").start()
    try:
        client = openai.OpenAI(base_url=f"{second.base_url}/v1", api_key="k", max_retries=0, timeout=120)
        got = client.responses.retrieve(r.id)
        assert (got.status, got.output_text, got.usage) == (r.status, r.output_text, r.usage)
        assert [i.content[0].text for i in client.conversations.items.list(conv.id)] == ["kept"]
    finally:
        second.stop()
