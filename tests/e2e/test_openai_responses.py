"""OpenAI Responses through the official SDK."""
from __future__ import annotations

import openai
import pytest

MODEL = "smollm2-135m-instruct"


def test_buffered_response(openai_client):
    r = openai_client.responses.create(model=MODEL, input="What is the capital of France?",
                                       temperature=0, max_output_tokens=24)
    assert r.object == "response" and r.id.startswith("resp_")
    assert "Paris" in r.output_text
    assert r.status in ("completed", "incomplete")
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens


def test_stream_helper_and_sequence_numbers(openai_client):
    b = openai_client.responses.create(model=MODEL, input="What is the capital of France?",
                                       temperature=0, max_output_tokens=12)
    seen = []
    with openai_client.responses.stream(model=MODEL, input="What is the capital of France?",
                                        temperature=0, max_output_tokens=12) as stream:
        for event in stream:
            seen.append(event)
        if b.status == "completed":
            final = stream.get_final_response()
            assert final.output_text == b.output_text
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert seen[0].type == "response.created"
    assert seen[-1].type in ("response.completed", "response.incomplete")


def test_budget_cut_is_incomplete(openai_client):
    r = openai_client.responses.create(model=MODEL, input="Write a long story about a dragon.",
                                       temperature=0, max_output_tokens=3)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3


def test_instructions_and_message_items(openai_client):
    r = openai_client.responses.create(model=MODEL, instructions="Answer briefly.", temperature=0,
                                       max_output_tokens=8, input=[
                                           {"role": "user", "content": [{"type": "input_text",
                                                                         "text": "Name a colour."}]}])
    assert r.output and r.output[0].type == "message"


def test_unknown_durable_references_are_404(openai_client):
    with pytest.raises(openai.NotFoundError) as exc:
        openai_client.responses.create(model=MODEL, input="hi", previous_response_id="resp_123")
    assert "resp_123" in exc.value.message and exc.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError) as exc:
        openai_client.responses.create(model=MODEL, input="hi", conversation="conv_1")
    assert exc.value.body["param"] == "conversation"


def test_negative_budget_names_field(openai_client):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.responses.create(model=MODEL, input="hi", max_output_tokens=-5)
    assert "max_output_tokens" in exc.value.message


def test_zero_budget(openai_client):
    r = openai_client.responses.create(model=MODEL, input="hi", max_output_tokens=0)
    assert r.usage.output_tokens == 0
    assert r.status == "incomplete"


def test_forced_function_call_buffered_and_streamed(openai_client):
    tool = {"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    kw = dict(model=MODEL, input="What is the weather in Paris?", tools=[tool], tool_choice="required",
              temperature=0, max_output_tokens=96)
    r = openai_client.responses.create(**kw)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
    with openai_client.responses.stream(**kw) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [(o.type, getattr(o, "arguments", None)) for o in final.output] == \
           [(o.type, getattr(o, "arguments", None)) for o in r.output]
    assert any(e.type == "response.function_call_arguments.done" and e.name == "get_weather" for e in events)
    assert sum(e.type == "response.function_call_arguments.delta" for e in events) > 5


def test_logprobs_cover_exactly_the_output_text(openai_client):
    kw = dict(model=MODEL, input="What is the capital of France?", temperature=0,
              max_output_tokens=24, top_logprobs=2, include=["message.output_text.logprobs"])
    r = openai_client.responses.create(**kw)
    assert r.status == "completed"
    part = r.output[0].content[0]
    assert b"".join(bytes(lp.bytes) for lp in part.logprobs) == part.text.encode()
    events = list(openai_client.responses.create(**kw, stream=True))
    for e in events:
        if e.type == "response.output_text.delta":
            assert "".join(lp.token for lp in e.logprobs) == e.delta
    done = [e for e in events if e.type == "response.output_text.done"][0]
    assert [lp.token for lp in done.logprobs] == [lp.token for lp in part.logprobs]
