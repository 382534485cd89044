"""OpenAI Chat Completions through the official SDK against the real server and model."""
from __future__ import annotations

import json

import openai
import pytest

MODEL = "smollm2-135m-instruct"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
OPEN_TAG = "<tool_call>"
PRIMER = OPEN_TAG + '\n{"name": "get_weather", "arguments": '   # a forced call's opening


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def test_buffered_greedy_answer_names_paris(openai_client):
    r = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0,
                                              max_tokens=24)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    choice = r.choices[0]
    assert "Paris" in choice.message.content
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_stream_matches_buffered_and_sends_usage_once(openai_client):
    buffered = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0,
                                                     max_tokens=16)
    chunks = list(openai_client.chat.completions.create(
        model=MODEL, messages=FRANCE, temperature=0, max_tokens=16, stream=True,
        stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == buffered.choices[0].message.content
    with_usage = [c for c in chunks if c.usage is not None]
    assert len(with_usage) == 1 and with_usage[0] is chunks[-1] and chunks[-1].choices == []
    assert with_usage[0].usage.completion_tokens == buffered.usage.completion_tokens
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [buffered.choices[0].finish_reason]


def test_stream_helper_accumulates(openai_client):
    with openai_client.chat.completions.stream(model=MODEL, messages=FRANCE, temperature=0,
                                               max_tokens=16) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert "Paris" in final.choices[0].message.content


def test_n_choices_and_seed_reproducible(openai_client):
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a word."}],
              temperature=1.0, max_tokens=8, n=2, seed=1234)
    a = openai_client.chat.completions.create(**kw)
    b = openai_client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]


def test_logprobs_and_top_logprobs(openai_client):
    r = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0,
                                              max_tokens=6, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        # greedy: the chosen token is the most likely one
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-5)
        assert bytes(entry.bytes).decode("utf-8", "replace") == entry.token or entry.bytes


def test_stop_sequence_is_not_returned(openai_client):
    r = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0,
                                              max_tokens=24, stop=["Paris"])
    assert "Paris" not in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"


def test_zero_budget_decodes_nothing(openai_client):
    r = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=0)
    assert r.usage.completion_tokens == 0
    assert r.choices[0].message.content in ("", None)
    assert r.choices[0].finish_reason == "length"


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_negative_budget_names_the_field(openai_client, field):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.chat.completions.create(model=MODEL, messages=FRANCE, **{field: -1})
    assert field in exc.value.message
    assert exc.value.body["param"] == field


def test_non_integer_budget_is_400(openai_client):
    with pytest.raises(openai.BadRequestError):
        openai_client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=2.5)


def test_unknown_model_is_native_404(openai_client):
    with pytest.raises(openai.NotFoundError) as exc:
        openai_client.chat.completions.create(model="gpt-nonexistent", messages=FRANCE)
    assert exc.value.body["code"] == "model_not_found"


def test_image_refused_as_text_only(openai_client):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}])
    assert "text-only" in exc.value.message


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def test_tool_results_accepted_back(openai_client):
    r = openai_client.chat.completions.create(model=MODEL, temperature=0, max_tokens=24, tools=[WEATHER_TOOL],
        messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 degrees"},
        ])
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r.usage.prompt_tokens > 20


def test_forced_tool_call_stream_and_buffered_agree(openai_client):
    kw = dict(model=MODEL, temperature=0, max_tokens=96, tools=[WEATHER_TOOL], tool_choice="required",
              messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    buffered = openai_client.chat.completions.create(**kw)
    chunks = list(openai_client.chat.completions.create(**kw, stream=True))
    b = buffered.choices[0]
    assert b.finish_reason == "tool_calls"
    call = b.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments), dict)
    # the stream: header fragment (index, id, type, name) then argument fragments as the model
    # writes them, same call
    frags = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert frags[0].id and frags[0].type == "function" and frags[0].function.name == "get_weather"
    assert all(f.id is None and f.function.name is None for f in frags[1:])
    assert len(frags) > 5, "arguments arrive in many fragments"
    assert "".join(f.function.arguments or "" for f in frags) == call.function.arguments
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["tool_calls"]


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.0, "seed": 4242}])
def test_stream_helper_tool_call_equals_buffered(openai_client, sampling):
    """The same (greedy or seeded) request buffered and through the SDK's stream helper: the
    helper's final completion equals the buffered one, whatever the model wrote."""
    kw = dict(model=MODEL, max_tokens=64, tools=[WEATHER_TOOL], **sampling,
              tool_choice={"type": "function", "function": {"name": "get_weather"}},
              messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    buffered = openai_client.chat.completions.create(**kw)
    deltas = []
    with openai_client.chat.completions.stream(**kw) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                deltas.append(event.arguments_delta)
        try:
            final = stream.get_final_completion()
        except openai.LengthFinishReasonError as exc:   # the helper's answer to "length"
            final = exc.completion
    b, f = buffered.choices[0], final.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in b.message.tool_calls or []]
    streamed = [(c.function.name, c.function.arguments) for c in f.message.tool_calls or []]
    assert f.finish_reason == b.finish_reason
    # every call the budget did not cut is the same, its arguments assembled from the deltas
    assert [c for c in streamed if _is_json(c[1])] == calls
    if len(streamed) == len(calls):
        # the first chunk's `content: ""` accumulates to "" where the buffered message says null
        assert streamed == calls and (f.message.content or None) == b.message.content
        assert "".join(deltas) == "".join(args for _, args in calls)
    else:   # the budget cut a call beyond repair: buffered has it as the text the model wrote
        assert b.finish_reason == "length" and OPEN_TAG in b.message.content
    if sampling["temperature"] == 0:
        assert calls and f.finish_reason == "tool_calls" and len(deltas) > 5


def test_tool_call_cut_by_budget_is_plain_content(openai_client):
    """Seed 001: a budget cut inside a tool call that no repair completes returns as assistant
    content, the text as written (the forced call's opening included), finish "length". The
    stream has sent the arguments as they were written and cannot take them back: there the
    call ends with them, finish "length" too."""
    kw = dict(model=MODEL, temperature=0, max_tokens=3, tools=[WEATHER_TOOL], tool_choice="required",
              messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    r = openai_client.chat.completions.create(**kw)
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    assert not choice.message.tool_calls
    content = choice.message.content
    assert content.startswith(PRIMER) and content[len(PRIMER):].lstrip().startswith("{")
    chunks = list(openai_client.chat.completions.create(**kw, stream=True))
    frags = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert frags[0].function.name == "get_weather"
    arguments = "".join(f.function.arguments or "" for f in frags)
    assert arguments.startswith("{") and content[len(PRIMER):].lstrip().startswith(arguments)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] \
        == ["length"]


def _joined(entries) -> bytes:
    return b"".join(bytes(e.bytes) for e in entries)


@pytest.mark.parametrize("stop", [None, ["Paris"]])
def test_logprobs_cover_exactly_the_returned_text(openai_client, stop):
    """No entry for the end token or a stop string; buffered and streamed alike, and every
    chunk's logprobs spell that chunk's text."""
    kw = dict(model=MODEL, messages=FRANCE, temperature=0, max_tokens=24, logprobs=True,
              top_logprobs=2, stop=stop)
    r = openai_client.chat.completions.create(**kw)
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    content = choice.message.content
    assert _joined(choice.logprobs.content) == content.encode()
    assert "<|im_end|>" not in [e.token for e in choice.logprobs.content]
    chunks = list(openai_client.chat.completions.create(**kw, stream=True))
    streamed = []
    for c in chunks:
        for ch in c.choices:
            entries = ch.logprobs.content if ch.logprobs else []
            assert _joined(entries) == (ch.delta.content or "").encode()
            streamed += entries
    assert [(e.token, e.bytes, e.logprob) for e in streamed] == \
           [(e.token, e.bytes, e.logprob) for e in choice.logprobs.content]
