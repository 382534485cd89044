"""Anthropic Messages through the official anthropic SDK."""
from __future__ import annotations

import anthropic
import pytest

MODEL = "smollm2-135m-instruct"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


def test_buffered_message(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL, max_tokens=24, messages=FRANCE, extra_body={"temperature": 0})
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.content[0].type == "text" and "Paris" in m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0


def test_stream_helper_final_message_equals_buffered(anthropic_client):
    b = anthropic_client.messages.create(model=MODEL, max_tokens=12, messages=FRANCE, extra_body={"temperature": 0})
    with anthropic_client.messages.stream(model=MODEL, max_tokens=12, messages=FRANCE,
                                          extra_body={"temperature": 0}) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == b.content[0].text == final.content[0].text
    assert final.stop_reason == b.stop_reason
    assert final.usage.output_tokens == b.usage.output_tokens


def test_budget_cut_maps_to_max_tokens(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL, max_tokens=2, messages=FRANCE, extra_body={"temperature": 0})
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 2


def test_stop_sequence(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL, max_tokens=24, messages=FRANCE, extra_body={"temperature": 0},
                                         stop_sequences=["Paris"])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "Paris"
    assert "Paris" not in "".join(b.text for b in m.content if b.type == "text")


def test_system_and_prefill(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL, max_tokens=8, extra_body={"temperature": 0},
                                         system="You answer in one word.",
                                         messages=FRANCE + [{"role": "assistant", "content": "The capital is"}])
    assert m.content and m.content[0].type == "text"


def test_count_tokens(anthropic_client):
    r = anthropic_client.messages.count_tokens(model=MODEL, messages=FRANCE)
    m = anthropic_client.messages.create(model=MODEL, max_tokens=1, messages=FRANCE)
    assert r.input_tokens == m.usage.input_tokens


def test_zero_budget(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL, max_tokens=0, messages=FRANCE)
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 0 and m.content == []


def test_errors_use_anthropic_envelope(anthropic_client):
    with pytest.raises(anthropic.BadRequestError) as exc:
        anthropic_client.messages.create(model=MODEL, max_tokens=-1, messages=FRANCE)
    assert exc.value.body["type"] == "error"
    assert exc.value.body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in exc.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError) as exc:
        anthropic_client.messages.create(model="claude-nope", max_tokens=4, messages=FRANCE)
    assert exc.value.body["error"]["type"] == "not_found_error"


def test_image_refused(anthropic_client):
    with pytest.raises(anthropic.BadRequestError) as exc:
        anthropic_client.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "what is this?"}]}])
    assert "text-only" in exc.value.body["error"]["message"]


def test_tool_result_blocks_accepted(anthropic_client):
    tools = [{"name": "get_weather", "description": "Weather in a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    m = anthropic_client.messages.create(model=MODEL, max_tokens=16, extra_body={"temperature": 0}, tools=tools, messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "Sunny, 21 degrees"}]},
    ])
    assert m.stop_reason in ("end_turn", "max_tokens", "tool_use")


WEATHER = {"name": "get_weather", "description": "Get the current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}


def test_forced_tool_use_buffered_and_streamed(anthropic_client):
    kw = dict(model=MODEL, max_tokens=96, tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather"},
              messages=[{"role": "user", "content": "What is the weather in Paris?"}], extra_body={"temperature": 0})
    m = anthropic_client.messages.create(**kw)
    assert m.stop_reason == "tool_use"
    uses = [b for b in m.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    assert isinstance(uses[0].input, dict)
    with anthropic_client.messages.stream(**kw) as stream:
        partials = sum(event.type == "input_json" for event in stream)
        final = stream.get_final_message()
    assert [(b.type, getattr(b, "input", None)) for b in final.content] == \
           [(b.type, getattr(b, "input", None)) for b in m.content]
    assert final.stop_reason == "tool_use"
    assert partials > 5, "input_json_delta events as the arguments are written"


def test_tool_use_cut_by_budget_is_max_tokens_text(anthropic_client):
    """Seed 001: a budget cut inside a tool call that no repair completes returns as text (as
    the model wrote it), stop_reason "max_tokens". The stream has sent the input as it was
    written: there the tool_use block ends with it, "max_tokens" too."""
    kw = dict(model=MODEL, max_tokens=3, tools=[WEATHER], tool_choice={"type": "any"},
              extra_body={"temperature": 0}, messages=[{"role": "user", "content": "Weather in Paris?"}])
    m = anthropic_client.messages.create(**kw)
    assert m.stop_reason == "max_tokens"
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text.startswith('<tool_call>\n{"name": "get_weather", "arguments": ')
    with anthropic_client.messages.stream(**kw) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens"
    assert [(b.type, b.name) for b in final.content] == [("tool_use", "get_weather")]
    assert isinstance(final.content[0].input, dict)
