"""The model's own output never breaks an answer: whatever it writes inside <tool_call> (NaN,
Infinity, numbers that overflow a double, nesting past strict_json.MAX_JSON_DEPTH, unfinished
strings, missing closes), split into deltas anywhere and ended by a stop or the budget, every
surface's stream and buffered builder answer without an exception, every document they emit is
strict JSON (no NaN or Infinity), a buffered call's arguments are strict JSON (a broken call comes
back as text), and the stream's complete calls are exactly the buffered calls."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jiter import from_json

from aotx import strict_json
from aotx.chat_types import ToolSpec
from aotx.tool_calls import forced_call_primer
from api.surfaces.chat.buffered import build_chat_completion
from api.surfaces.chat.stream import ChatStreamProjector
from api.surfaces.messages.buffered import build_message
from api.surfaces.messages.stream import MessagesStreamProjector
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.stream import ResponsesStreamProjector
from tests.aotx.model_text import arguments, model_text, split
from tests.aotx.test_tool_calls import HOSTILE_BODIES
from tests.api.tapes import PROMPT_TOKENS, tape
from tests.api.test_tape_projections import responses_args
from tests.api.validators import (parse_sse, validate_chat_stream, validate_messages_stream,
                                  validate_responses_stream)

PRIMER = forced_call_primer([ToolSpec("get_weather")], "required")


def _is_json(text: str) -> bool:
    try:
        strict_json.loads(text)
    except (json.JSONDecodeError, strict_json.JsonInputError):
        return False
    return True


def _sse(events) -> bytes:
    """The stream's bytes; every event's data re-read as strict JSON (no NaN, no Infinity)."""
    raw = b"".join(e.encode() for e in events)
    for _, data in parse_sse(raw):
        if data != "[DONE]":
            strict_json.loads(json.dumps(data, allow_nan=True))
    return raw


def _drive(projector, deltas) -> bytes:
    events = list(projector.open())
    for delta in deltas:
        events += projector.feed(0, delta)
        if projector.done:
            break
    assert projector.done
    return _sse(events)


def _buffered(obj: dict) -> dict:
    return strict_json.loads(strict_json.dumps(obj))        # raises on NaN / Infinity


def answers(deltas, primer: str, logprobs: bool) -> dict:
    """Every tool surface, streamed and buffered: (text, calls, finish) of each."""
    out = {}
    chat = dict(id="chatcmpl-x", created=1, model="m", fingerprint="fp", parse_tools=True,
                logprobs=logprobs, tool_primer=primer)
    built = _buffered(build_chat_completion([deltas], **chat))["choices"][0]
    msg = built["message"]
    if logprobs:   # logprobs cover exactly the returned text, a broken call's included
        spelled = b"".join(bytes(e["bytes"]) for e in built["logprobs"]["content"]).decode()
        content = msg["content"] or ""
        # the primer of a forced call that came back as text was never generated: no entries
        assert content.endswith(spelled) and content[:len(content) - len(spelled)] in ("", primer)
    out["chat", "buffered"] = (msg["content"] or "", [(c["function"]["name"], c["function"]["arguments"])
                               for c in msg.get("tool_calls") or []], built["finish_reason"])
    raw = _drive(ChatStreamProjector(**chat, n=1, include_usage=False), deltas)
    s = validate_chat_stream(raw)["choices"][0]
    out["chat", "stream"] = (s["content"], [(c["name"], c["arguments"]) for c in s["tool_calls"]],
                             s["finish"])

    messages = dict(id="msg_x", model="m", input_tokens=PROMPT_TOKENS, parse_tools=True,
                    tool_primer=primer)
    m = _buffered(build_message(deltas, **messages))
    out["messages", "buffered"] = (
        "".join(b["text"] for b in m["content"] if b["type"] == "text"),
        [(b["name"], b["input"]) for b in m["content"] if b["type"] == "tool_use"], m["stop_reason"])
    s = validate_messages_stream(_drive(MessagesStreamProjector(**messages), deltas))
    out["messages", "stream"] = (
        "".join(b["text"] for b in s["blocks"] if b["type"] == "text"),
        [(b["name"], b["input"], b["complete"]) for b in s["blocks"] if b["type"] == "tool_use"],
        s["stop_reason"])

    args = responses_args(type("C", (), {"tools": True, "logprobs": logprobs})) | {"tool_primer": primer}
    r = _buffered(build_response(deltas, **args))
    out["responses", "buffered"] = (_output_text(r), [(i["name"], i["arguments"], i["status"])
                                    for i in r["output"] if i["type"] == "function_call"], r["status"])
    final = validate_responses_stream(_drive(ResponsesStreamProjector(**args), deltas))["final"]
    out["responses", "stream"] = (_output_text(final), [(i["name"], i["arguments"], i["status"])
                                  for i in final["output"] if i["type"] == "function_call"],
                                  final["status"])
    return out


def _output_text(response: dict) -> str:
    return "".join(p["text"] for i in response["output"] if i["type"] == "message"
                   for p in i["content"])


def check(deltas, primer: str = "", logprobs: bool = False) -> dict:
    out = answers(deltas, primer, logprobs)
    # buffered: every call's arguments are strict JSON (a broken call came back as text)
    text, calls, finish = out["chat", "buffered"]
    assert all(_is_json(a) for _, a in calls)
    assert all(isinstance(i, dict) for _, i in out["messages", "buffered"][1])
    assert all(_is_json(a) and st_ == "completed" for _, a, st_ in out["responses", "buffered"][1])
    # the stream: its complete calls are the buffered ones; a broken one is marked where the
    # surface can say so (Responses "incomplete"), and the finish is the same
    s_text, s_calls, s_finish = out["chat", "stream"]
    assert [c for c in s_calls if _is_json(c[1])] == calls and s_finish == finish
    for _, a in s_calls:   # a broken call's arguments: a prefix the SDKs read, with no NaN in it
        strict_json.dumps(from_json(a.encode(), partial_mode=True))
    r_calls = out["responses", "stream"][1]
    assert [(n, a) for n, a, st_ in r_calls if st_ == "completed"] == calls
    assert all(st_ == "incomplete" and not _is_json(a) for _, a, st_ in r_calls if st_ != "completed")
    assert [(n, a) for n, a, _ in r_calls] == s_calls
    assert [(n, strict_json.loads(a)) for n, a in calls] == out["messages", "buffered"][1]
    m_calls = out["messages", "stream"][1]
    assert [(n, i) for n, i, whole in m_calls if whole] == out["messages", "buffered"][1]
    assert out["messages", "stream"][2] == out["messages", "buffered"][2]
    assert out["responses", "stream"][2] == out["responses", "buffered"][2]
    if len(s_calls) == len(calls):     # no broken call: the two shapes are the same
        assert (s_text, s_calls) == (text, calls)
        assert out["messages", "stream"][0] == out["messages", "buffered"][0] == text
        assert out["responses", "stream"][0] == out["responses", "buffered"][0] == text
    else:                               # buffered has the broken call's text, as written
        assert len(text) > len(s_text)
    return out


@pytest.mark.parametrize("body", HOSTILE_BODIES)
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_hostile_arguments_on_every_surface(body, finish):
    raw = f"Let me see.\n<tool_call>\n{body}\n</tool_call>"
    out = check(tape([raw[k:k + 9] for k in range(0, len(raw), 9)], finish))
    assert out["chat", "buffered"][:2] == (raw, [])          # the call is its text
    assert out["messages", "buffered"][1] == [] and out["responses", "buffered"][1] == []


@settings(max_examples=150, deadline=None)
@given(model_text, st.data(), st.sampled_from(["stop", "length"]), st.booleans(), st.booleans())
def test_any_model_text_split_anywhere(text, data, finish, forced, logprobs):
    primer = PRIMER if forced else ""
    if forced:                      # the model writes on from the primer: the arguments first
        text = data.draw(arguments()) + text
    check(tape(split(data, text) or [""], finish, logprobs=logprobs), primer, logprobs)


@pytest.mark.parametrize("arguments", ['{"a": NaN}', '{"a": 1e999}', "[" * 5000 + "]" * 5000,
                                       '{"a": 1', "[1]"])
def test_the_messages_input_is_read_as_strict_json_with_a_defined_fallback(arguments, caplog):
    """Never reached with such arguments (a buffered call's arguments are complete strict JSON),
    but should it be: the input is {}, with a warning; never `inf`, `nan` or a RecursionError."""
    from api.surfaces.messages.buffered import tool_input
    with caplog.at_level("WARNING", logger="aotx.tool_calls"):
        assert tool_input(arguments) == {}
    assert arguments == "[1]" or caplog.records
