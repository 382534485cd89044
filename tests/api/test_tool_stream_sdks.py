"""Streamed tool calls through the official SDKs' stream helpers, over the real routes and a
tape-replaying service (the same tape buffered and streamed): the helpers' final objects equal
the buffered ones, and the arguments arrive in several fragments. The one difference: a call
the budget cuts beyond repair is assistant content when buffered (seed 001), while the stream,
which has sent its fragments, ends the call with them; the finish is the budget's either way."""
from __future__ import annotations

import logging

import anthropic
import httpx
import httpx2
import openai
import pytest

from tests.api.fake_service import FakeService, make_app
from tests.api.tapes import CALL, engine_tape

MODEL = FakeService.model_id
USER = [{"role": "user", "content": "Weather in Paris and Rome?"}]
SECOND = CALL.replace("Paris", "Rome")
TEXT = "Let me check.\n" + CALL + "\n" + SECOND + "\n"
GENERATED_AT_25 = TEXT.encode()[:75].decode()      # 25 tokens of 3 bytes: inside the first call
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}
FLAT_TOOL = {"type": "function", "name": "get_weather",
             "parameters": CHAT_TOOL["function"]["parameters"]}
ANTHROPIC_TOOL = {"name": "get_weather", "input_schema": CHAT_TOOL["function"]["parameters"]}


def tokens(text: str, size: int = 3) -> list[bytes]:
    raw = text.encode()
    return [raw[i:i + size] for i in range(0, len(raw), size)]


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def app(service):
    return make_app(service)


@pytest.fixture
def oai(app):
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://tape")
    return openai.AsyncOpenAI(base_url="http://tape/v1", api_key="k", http_client=http,
                              max_retries=0)


@pytest.fixture
def claude(app):
    # the anthropic SDK runs on httpx2 (its own fork of httpx)
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://tape")
    return anthropic.AsyncAnthropic(base_url="http://tape", api_key="k", http_client=http,
                                    max_retries=0)


def _chat_calls(message):
    return [(c.type, c.function.name, c.function.arguments) for c in message.tool_calls or []]


@pytest.mark.parametrize("cut", [False, True])
async def test_chat_stream_helper_final_equals_buffered(service, oai, cut):
    deltas = engine_tape(tokens(TEXT), max_tokens=25 if cut else None)
    service.tapes = [deltas]
    kw = dict(model=MODEL, messages=USER, tools=[CHAT_TOOL])
    buffered = await oai.chat.completions.create(**kw)
    fragments = []
    async with oai.chat.completions.stream(**kw) as stream:
        async for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                fragments.append(event.arguments_delta)
        try:
            final = await stream.get_final_completion()
        except openai.LengthFinishReasonError as exc:   # the helper's answer to "length"
            final = exc.completion
    b, f = buffered.choices[0], final.choices[0]
    assert f.finish_reason == b.finish_reason == ("length" if cut else "tool_calls")
    assert f.message.content == "Let me check."
    assert len(fragments) > 3, "arguments come in many fragments"
    if cut:   # buffered: all of it as the model wrote it, the partial call included
        assert b.message.content == GENERATED_AT_25 and not b.message.tool_calls
        (call,) = f.message.tool_calls
        assert GENERATED_AT_25.endswith(call.function.arguments) and "".join(fragments) == \
            call.function.arguments
    else:
        assert b.message.content == "Let me check."
        assert _chat_calls(f.message) == _chat_calls(b.message)
        assert [c.function.arguments for c in b.message.tool_calls] == [
            '{"city": "Paris", "unit": "°C"}', '{"city": "Rome", "unit": "°C"}']


@pytest.mark.parametrize("cut", [False, True])
async def test_anthropic_stream_helper_final_equals_buffered(service, claude, cut):
    service.tapes = [engine_tape(tokens(TEXT), max_tokens=25 if cut else None)]
    kw = dict(model=MODEL, max_tokens=64, messages=USER, tools=[ANTHROPIC_TOOL])
    buffered = await claude.messages.create(**kw)
    partials = 0
    async with claude.messages.stream(**kw) as stream:
        async for event in stream:
            partials += event.type == "input_json"
        final = await stream.get_final_message()
    strip = lambda m: [b.model_dump(exclude={"id"}) for b in m.content]   # noqa: E731
    assert final.stop_reason == buffered.stop_reason == ("max_tokens" if cut else "tool_use")
    assert partials > (2 if cut else 6)
    if cut:
        assert [(b.type, b.text) for b in buffered.content] == [("text", GENERATED_AT_25)]
        # the stream's call, as the SDK reads `{"city": "Pa` (partial mode drops the string)
        assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
            ("text", None), ("tool_use", {})]
        assert final.content[0].text == "Let me check."
    else:
        assert strip(final) == strip(buffered)
        assert [b.type for b in buffered.content] == ["text", "tool_use", "tool_use"]
        assert buffered.content[2].input == {"city": "Rome", "unit": "°C"}


async def test_responses_stream_helper_final_equals_buffered(service, oai):
    service.tapes = [engine_tape(tokens(TEXT))]
    kw = dict(model=MODEL, input="Weather in Paris and Rome?", tools=[FLAT_TOOL])
    buffered = await oai.responses.create(**kw)
    deltas = 0
    async with oai.responses.stream(**kw) as stream:
        async for event in stream:
            deltas += event.type == "response.function_call_arguments.delta"
        final = await stream.get_final_response()
    strip = lambda r: [(o.type, getattr(o, "name", None), getattr(o, "arguments", None),  # noqa: E731
                        o.status) for o in r.output]
    assert strip(final) == strip(buffered)
    assert [o.type for o in buffered.output] == ["message", "function_call", "function_call"]
    assert buffered.output[2].arguments == '{"city": "Rome", "unit": "°C"}'
    assert deltas > 6


async def test_responses_call_cut_by_the_budget_is_text_buffered_and_incomplete_streamed(
        service, oai):
    service.tapes = [engine_tape(tokens(TEXT), max_tokens=25)]
    kw = dict(model=MODEL, input="Weather?", tools=[FLAT_TOOL])
    buffered = await oai.responses.create(**kw)
    assert buffered.status == "incomplete" and buffered.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in buffered.output] == ["message"] and buffered.output_text == GENERATED_AT_25
    events = [e async for e in await oai.responses.create(**kw, stream=True)]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(o.type, o.status) for o in done] == [("message", "completed"),
                                                  ("function_call", "incomplete")]
    assert GENERATED_AT_25.endswith(done[-1].arguments) and done[-1].arguments.startswith('{"city"')
    assert events[-1].type == "response.incomplete"


async def test_a_budget_cut_inside_a_call_is_logged_with_the_request_id(service, oai, caplog):
    """Seed 001: the "tool call cut by token budget" marker, one structured line per answer."""
    service.tapes = [engine_tape(tokens(TEXT), max_tokens=25)]
    kw = dict(model=MODEL, messages=USER, tools=[CHAT_TOOL])
    with caplog.at_level(logging.INFO, logger="aotx.tool_calls"):
        raw = await oai.chat.completions.with_raw_response.create(**kw)
        [e async for e in await oai.chat.completions.create(**kw, stream=True)]
    cuts = [r.fields for r in caplog.records if r.getMessage() == "tool call cut by token budget"]
    assert [(c["tool"], c["complete"], c["returned_as"]) for c in cuts] == [
        ("get_weather", False, "text"), ("get_weather", False, "broken call")]
    assert cuts[0]["request_id"] == raw.headers["x-request-id"]
    assert cuts[0]["completion_tokens"] == 25
