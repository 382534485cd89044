"""Tapes through every surface's stream projector and buffered builder, checked by the
event-automaton validators and by the official SDK types."""
from __future__ import annotations

import anthropic.types as at
import pytest
from jiter import from_json
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from api.errors import ApiError
from api.surfaces.chat.buffered import build_chat_completion
from api.surfaces.chat.stream import ChatStreamProjector
from api.surfaces.completions.buffered import build_completion
from api.surfaces.completions.stream import CompletionStreamProjector
from api.surfaces.messages.buffered import build_message, tool_input
from api.surfaces.messages.stream import MessagesStreamProjector
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.stream import ResponsesStreamProjector
from tests.api.tapes import CALL_ARGS, CASES, PROMPT_TOKENS, run, tape
from tests.api.validators import (parse_sse, validate_chat_stream, validate_completion_stream,
                                  validate_messages_stream, validate_responses_stream)

IDS = [c.name for c in CASES]


def chat_args(case, n=1):
    return dict(id="chatcmpl-x", created=1, model="m", fingerprint="fp_1",
                parse_tools=case.tools, logprobs=case.logprobs)


# ---------------------------------------------------------------- Chat Completions
@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_stream(case, include_usage):
    raw = run(ChatStreamProjector(**chat_args(case), n=1, include_usage=include_usage),
              [case.deltas])
    result = validate_chat_stream(raw, include_usage=include_usage)
    for chunk in result["chunks"]:
        ChatCompletionChunk.model_validate(chunk)
    if case.finish is None:
        assert result["error"]["type"] == "server_error" and "device lost" in result["error"]["message"]
        return
    choice = result["choices"][0]
    text, calls = case.shape(streamed=True)
    assert choice["content"] == text and choice["finish"] == case.finish
    assert [(c["name"], c["arguments"]) for c in choice["tool_calls"]] == list(calls)
    if case.logprobs:
        assert [lp["token"] for lp in choice["logprobs"]] == ["Hi", " there"]
        assert choice["logprobs"][0]["bytes"] == list(b"Hi") and len(choice["logprobs"][0]["top_logprobs"]) == 2
    if include_usage:
        usage = result["chunks"][-1]["usage"]
        assert usage["prompt_tokens"] == PROMPT_TOKENS and usage["completion_tokens"] == case.deltas[-1].completion_tokens


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chat_buffered(case):
    if case.finish is None:
        with pytest.raises(ApiError) as err:
            build_chat_completion([case.deltas], **chat_args(case))
        assert err.value.status == 500
        return
    obj = build_chat_completion([case.deltas], **chat_args(case))
    parsed = ChatCompletion.model_validate(obj)
    msg = parsed.choices[0].message
    assert (msg.content or "") == case.text and parsed.choices[0].finish_reason == case.finish
    assert [(c.function.name, c.function.arguments) for c in msg.tool_calls or []] == list(case.calls)
    if case.calls and not case.text:
        assert msg.content is None
    assert parsed.usage.prompt_tokens == PROMPT_TOKENS
    if case.logprobs:
        assert [t.token for t in parsed.choices[0].logprobs.content] == ["Hi", " there"]


def test_chat_n2_interleaved_each_choice_finishes():
    tapes = [tape(["a", "b"]), tape(["x", "y", "z"], "length")]
    projector = ChatStreamProjector(id="chatcmpl-x", created=1, model="m", fingerprint="fp_1", n=2,
                                    parse_tools=False, include_usage=True, logprobs=False)
    result = validate_chat_stream(run(projector, tapes), n=2, include_usage=True)
    assert result["choices"][0]["content"] == "ab" and result["choices"][0]["finish"] == "stop"
    assert result["choices"][1]["content"] == "xyz" and result["choices"][1]["finish"] == "length"
    usage = result["chunks"][-1]["usage"]
    assert usage["prompt_tokens"] == PROMPT_TOKENS and usage["completion_tokens"] == 3 + 3
    built = build_chat_completion(tapes, id="c", created=1, model="m", fingerprint="f",
                                  parse_tools=False, logprobs=False)
    assert [c["index"] for c in built["choices"]] == [0, 1]


# ---------------------------------------------------------------- legacy Completions
COMPLETION_CASES = [c for c in CASES if not c.tools]


def completion_args(case, echo=None, n=1):
    return dict(id="cmpl-x", created=1, model="m", fingerprint="fp_1", n=n,
                echo_texts=[echo], logprobs=2 if case.logprobs else None)


@pytest.mark.parametrize("case", COMPLETION_CASES, ids=[c.name for c in COMPLETION_CASES])
@pytest.mark.parametrize("include_usage", [False, True])
def test_completion_stream(case, include_usage):
    raw = run(CompletionStreamProjector(**completion_args(case), include_usage=include_usage),
              [case.deltas])
    result = validate_completion_stream(raw, include_usage=include_usage)
    for chunk in result["chunks"]:
        # The SDK types finish_reason as non-null and builds stream chunks without
        # validation; a null finish mid-stream is the wire shape (WIRE-REFERENCE 2c).
        typed = {**chunk, "choices": [{**c, "finish_reason": c["finish_reason"] or "stop"}
                                      for c in chunk["choices"]]}
        Completion.model_validate(typed)
    if case.finish is None:
        assert result["error"]
        return
    assert result["choices"][0]["text"] == case.text and result["choices"][0]["finish"] == case.finish
    if case.logprobs:
        assert result["choices"][0]["tokens"] == ["Hi", " there"]
        assert result["choices"][0]["offsets"] == [0, 2]


@pytest.mark.parametrize("case", COMPLETION_CASES, ids=[c.name for c in COMPLETION_CASES])
def test_completion_buffered(case):
    if case.finish is None:
        with pytest.raises(ApiError):
            build_completion([case.deltas], **completion_args(case))
        return
    parsed = Completion.model_validate(build_completion([case.deltas], **completion_args(case)))
    assert parsed.choices[0].text == case.text and parsed.choices[0].finish_reason == case.finish


def test_completion_echo_with_prompt_logprobs_and_offsets():
    from tests.api.tapes import _lp
    prompt_lps = (_lp("Say", 0), _lp(" hi", 1))
    prompt_lps = (prompt_lps[0].__class__(0, "Say", b"Say", None, ()), prompt_lps[1])
    deltas = tape(["Hi", " there"], logprobs=True)
    deltas[0] = deltas[0].__class__(**{**deltas[0].__dict__, "prompt_logprobs": prompt_lps})
    args = dict(id="cmpl-x", created=1, model="m", fingerprint="f", n=1, echo_texts=["Say hi"],
                logprobs=1)
    obj = build_completion([deltas], **args)
    # The real API (and our brief) put null first under echo; the SDK types it as float but
    # builds responses without validation, so check the dict itself.
    lp = obj["choices"][0]["logprobs"]
    assert obj["choices"][0]["text"] == "Say hiHi there"
    assert lp["tokens"] == ["Say", " hi", "Hi", " there"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert lp["top_logprobs"][2] == {"Hi": -0.5, "x": -3.0}
    assert lp["text_offset"] == [0, 3, 6, 8]
    stream = validate_completion_stream(run(CompletionStreamProjector(**args, include_usage=False),
                                            [deltas]))
    assert stream["choices"][0]["text"] == "Say hiHi there"
    assert stream["choices"][0]["offsets"] == [0, 3, 6, 8]


def test_completion_two_prompts_two_choices_indices():
    tapes = [tape(["a"]), tape(["b"]), tape(["c"]), tape(["d"])]
    args = dict(id="cmpl-x", created=1, model="m", fingerprint="f", n=2,
                echo_texts=[None] * 4, logprobs=None)
    result = validate_completion_stream(
        run(CompletionStreamProjector(**args, include_usage=True), tapes), choices=4,
        include_usage=True)
    assert [result["choices"][i]["text"] for i in range(4)] == ["a", "b", "c", "d"]
    assert result["chunks"][-1]["usage"]["prompt_tokens"] == 2 * PROMPT_TOKENS


# ---------------------------------------------------------------- Anthropic Messages
ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def anthropic_stop(case):
    return "stop_sequence" if case.stop_sequence else ANTHROPIC_STOP[case.finish]


def messages_args(case):
    return dict(id="msg_x", model="m", input_tokens=PROMPT_TOKENS, parse_tools=case.tools)


def blocks_of(case, streamed=False):
    if case.blocks is not None:
        return list(case.blocks)
    text, calls = case.shape(streamed)
    blocks = [("text", text)] if text else []
    # a stream's tool_use input is what the SDK's partial parser reads from the fragments
    return blocks + [("tool_use", name, from_json(args.encode(), partial_mode=True) if streamed
                      else tool_input(args)) for name, args in calls]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_messages_stream(case):
    raw = run(MessagesStreamProjector(**messages_args(case)), [case.deltas])
    result = validate_messages_stream(raw)
    for name, data in parse_sse(raw):
        if name not in ("ping", "error"):
            getattr(at, "Raw" + "".join(p.title() for p in name.split("_")) + "Event").model_validate(data)
    if case.finish is None:
        assert result["error"]["type"] == "api_error"
        return
    got = [("text", b["text"]) if b["type"] == "text" else ("tool_use", b["name"], b["input"])
           for b in result["blocks"]]
    assert got == blocks_of(case, streamed=True)
    assert result["stop_reason"] == anthropic_stop(case)
    assert result["stop_sequence"] == case.stop_sequence
    assert result["usage"]["output_tokens"] == case.deltas[-1].completion_tokens


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_messages_buffered(case):
    if case.finish is None:
        with pytest.raises(ApiError):
            build_message(case.deltas, **messages_args(case))
        return
    msg = at.Message.model_validate(build_message(case.deltas, **messages_args(case)))
    got = [("text", b.text) if b.type == "text" else ("tool_use", b.name, b.input) for b in msg.content]
    assert got == blocks_of(case)
    assert msg.stop_reason == anthropic_stop(case) and msg.stop_sequence == case.stop_sequence
    assert msg.usage.input_tokens == PROMPT_TOKENS and msg.id.startswith("msg_")


# ---------------------------------------------------------------- OpenAI Responses
def responses_args(case):
    return dict(id="resp_x", created_at=1, model="m", parse_tools=case.tools,
                logprobs=case.logprobs,
                echo={"instructions": None, "metadata": {}, "max_output_tokens": None,
                      "temperature": 1.0, "top_p": 1.0, "top_logprobs": 0,
                      "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                      "user": None})


def check_response(final: dict, case, streamed: bool = False) -> Response:
    parsed = Response.model_validate(final)
    text, calls = case.shape(streamed)
    assert parsed.output_text == text
    assert [(i.name, i.arguments) for i in parsed.output if i.type == "function_call"] == list(calls)
    # a broken call (streams only) is "incomplete"; every other item "completed"
    broken = [i.status == "incomplete" for i in parsed.output]
    assert broken == [i.type == "function_call" and (i.name, i.arguments) not in case.calls
                      for i in parsed.output]
    if case.finish == "length":
        assert parsed.status == "incomplete" and parsed.incomplete_details.reason == "max_output_tokens"
    else:
        assert parsed.status == "completed" and parsed.incomplete_details is None
    assert parsed.usage.input_tokens == PROMPT_TOKENS
    if case.logprobs:
        assert [lp.token for lp in parsed.output[0].content[0].logprobs] == ["Hi", " there"]
    return parsed


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_responses_stream(case):
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter
    raw = run(ResponsesStreamProjector(**responses_args(case)), [case.deltas])
    result = validate_responses_stream(raw)
    adapter = TypeAdapter(ResponseStreamEvent)
    for _, data in parse_sse(raw):
        adapter.validate_python(data)
    if case.finish is None:
        assert result["terminal"] == "response.failed" and result["error"]["code"] == "server_error"
        assert result["final"]["status"] == "failed"
        return
    check_response(result["final"], case, streamed=True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_responses_buffered(case):
    if case.finish is None:
        with pytest.raises(ApiError):
            build_response(case.deltas, **responses_args(case))
        return
    check_response(build_response(case.deltas, **responses_args(case)), case)


def test_completion_text_offsets_count_characters_across_split_utf8():
    """text_offset indexes the returned text even when tokens split a UTF-8 character:
    a token's offset is the count of complete characters before its first byte (the
    lone-token text U+FFFD must not be counted as a character of its own)."""
    from aotx.engine.types import Delta, TokenLogprob

    def lp(raw: bytes, logprob):
        return TokenLogprob(0, raw.decode("utf-8", errors="replace"), raw, logprob, ())

    prompt_lps = (lp(b"\xc3", None), lp(b"\xb1", -1.0), lp(b"!", -1.0))
    pieces = [(b"caf", "caf"), (b"\xc3", ""), (b"\xa9", "\u00e9"), (b"!", "!")]
    deltas = [Delta(text, token_ids=(k,), logprobs=(lp(raw, -0.5),), prompt_tokens=3,
                    completion_tokens=k + 1, prompt_logprobs=prompt_lps if k == 0 else ())
              for k, (raw, text) in enumerate(pieces)]
    deltas.append(Delta("", finish_reason="length", prompt_tokens=3, completion_tokens=4))
    args = dict(id="cmpl-x", created=1, model="m", fingerprint="f", n=1,
                echo_texts=["\u00f1!"], logprobs=0)
    choice = build_completion([deltas], **args)["choices"][0]
    text, offsets = choice["text"], choice["logprobs"]["text_offset"]
    assert text == "\u00f1!caf\u00e9!"
    assert offsets == [0, 0, 1, 2, 5, 5, 6]
    stream = validate_completion_stream(run(CompletionStreamProjector(**args, include_usage=False),
                                            [deltas]))
    assert stream["choices"][0]["offsets"] == offsets


# ---------------------------------------------------------------- tool arguments as generated
def _argument_fragments(surface: str, events) -> list[str]:
    frags = []
    for name, data in parse_sse(b"".join(e.encode() for e in events)):
        if surface == "chat" and isinstance(data, dict):
            for c in data["choices"]:
                frags += [tc["function"]["arguments"] for tc in c["delta"].get("tool_calls") or []
                          if tc["function"]["arguments"]]
        elif name == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            frags.append(data["delta"]["partial_json"])
        elif name == "response.function_call_arguments.delta":
            frags.append(data["delta"])
    return frags


def _projector(surface: str, case):
    if surface == "chat":
        return ChatStreamProjector(**chat_args(case), n=1, include_usage=False)
    if surface == "messages":
        return MessagesStreamProjector(**messages_args(case))
    return ResponsesStreamProjector(**responses_args(case))


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_arguments_stream_while_the_call_is_written(surface):
    """Each delta inside the arguments object is passed on when it arrives, before the call
    closes; the fragments assemble to the buffered arguments."""
    case = next(c for c in CASES if c.name == "tool_many_deltas")
    projector = _projector(surface, case)
    projector.open()
    closing = next(k for k, d in enumerate(case.deltas) if "}" in d.text and "city" not in d.text
                   and k > 5)
    before = [e for d in case.deltas[:closing] for e in projector.feed(0, d)]
    frags = _argument_fragments(surface, before)
    assert len(frags) >= 3 and CALL_ARGS.startswith("".join(frags))
    rest = [e for d in case.deltas[closing:] for e in projector.feed(0, d)]
    assert "".join(frags + _argument_fragments(surface, rest)) == CALL_ARGS


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_repair_arrives_as_the_last_fragment(surface):
    case = next(c for c in CASES if c.name == "tool_repaired")
    projector = _projector(surface, case)
    projector.open()
    frags = _argument_fragments(surface, [e for d in case.deltas for e in projector.feed(0, d)])
    assert frags[-1] == "}" and "".join(frags) == '{"city": "Paris"}'
