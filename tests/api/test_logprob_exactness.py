"""Logprobs cover exactly the returned text, on every surface that has them, buffered and
streamed: the entries' bytes concatenate to the returned content, and every stream chunk
carries the logprobs of its own text only (never the end token, a stop string or tool-call
markup)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.surfaces.chat.buffered import build_chat_completion
from api.surfaces.chat.stream import ChatStreamProjector
from api.surfaces.completions.buffered import build_completion
from api.surfaces.completions.stream import CompletionStreamProjector
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.stream import ResponsesStreamProjector
from tests.api.tapes import CALL, engine_tape
from tests.api.test_tape_projections import responses_args, run
from tests.api.validators import (parse_sse, validate_chat_stream, validate_completion_stream,
                                  validate_responses_stream)


def joined(entries) -> bytes:
    return b"".join(bytes(e["bytes"]) for e in entries)


def check_chat(deltas, *, tools=False) -> tuple[str, list]:
    """Both lanes; returns (content, buffered logprob entries)."""
    args = dict(id="chatcmpl-x", created=1, model="m", fingerprint="fp", parse_tools=tools,
                logprobs=True)
    built = build_chat_completion([deltas], **args)["choices"][0]
    content = built["message"]["content"] or ""
    entries = built["logprobs"]["content"]
    assert joined(entries) == content.encode()
    result = validate_chat_stream(run(ChatStreamProjector(**args, n=1, include_usage=False),
                                      [deltas]))
    for chunk in result["chunks"]:
        for choice in chunk["choices"]:
            text = choice["delta"].get("content") or ""
            lps = (choice["logprobs"] or {}).get("content") or []
            assert joined(lps) == text.encode(), f"chunk {text!r} carries {lps}"
            assert not lps or text, "no logprobs on a chunk without text"
    stream = result["choices"][0]
    assert stream["content"] == content and stream["logprobs"] == entries
    return content, entries


def check_responses(deltas, *, tools=False) -> str:
    args = responses_args(SimpleNamespace(tools=tools, logprobs=True))
    final = build_response(deltas, **args)
    texts = [(p["text"], p["logprobs"]) for item in final["output"] if item["type"] == "message"
             for p in item["content"]]
    for text, lps in texts:
        assert joined(lps) == text.encode()
    raw = run(ResponsesStreamProjector(**args), [deltas])
    validate_responses_stream(raw)
    streamed = []
    for name, data in parse_sse(raw):
        if name == "response.output_text.delta":
            assert data["delta"], "no empty text deltas"
            streamed += data["logprobs"]
        if name == "response.output_text.done":
            assert joined(data["logprobs"]) == data["text"].encode()
    buffered = [lp for _, lps in texts for lp in lps]
    assert streamed == [{k: v for k, v in lp.items() if k != "bytes"} |
                        {"top_logprobs": [{"token": t["token"], "logprob": t["logprob"]}
                                          for t in lp["top_logprobs"]]} for lp in buffered]
    return "".join(t for t, _ in texts)


def check_completions(deltas, chat_entries) -> None:
    args = dict(id="cmpl-x", created=1, model="m", fingerprint="fp", n=1, echo_texts=[None],
                logprobs=1)
    choice = build_completion([deltas], **args)["choices"][0]
    lp = choice["logprobs"]
    assert lp["tokens"] == [e["token"] for e in chat_entries]
    assert lp["token_logprobs"] == [e["logprob"] for e in chat_entries]
    stream = validate_completion_stream(run(CompletionStreamProjector(**args, include_usage=False),
                                            [deltas]))
    assert stream["choices"][0]["text"] == choice["text"]
    assert stream["choices"][0]["tokens"] == lp["tokens"]
    assert stream["choices"][0]["offsets"] == lp["text_offset"]
    for chunk in stream["chunks"]:
        for c in chunk["choices"]:
            assert c["logprobs"] is None or c["text"], "no logprobs on a chunk without text"


def check_all(deltas) -> tuple[str, list]:
    content, entries = check_chat(deltas)
    assert check_responses(deltas) == content
    check_completions(deltas, entries)
    return content, entries


def test_the_end_token_is_not_in_the_logprobs():
    content, entries = check_all(engine_tape([b"Hi", b" there", b"."]))
    assert content == "Hi there." and [e["token"] for e in entries] == ["Hi", " there", "."]


def test_a_token_straddling_a_stop_string_keeps_only_its_returned_bytes():
    deltas = engine_tape([b"The", b" capital", b" is", b" Paris", b"."], stop=["Paris"])
    content, entries = check_all(deltas)
    assert content == "The capital is "
    assert [e["token"] for e in entries] == ["The", " capital", " is", " "]
    last = entries[-1]
    assert last["bytes"] == [32] and last["logprob"] == pytest.approx(-0.28)   # " Paris"'s own
    assert [t["token"] for t in last["top_logprobs"]] == [" Paris", "x"]


def test_text_held_for_a_stop_prefix_comes_with_its_tokens():
    deltas = engine_tape([b"Hello", b" St", b"ay", b" St", b"op", b"!"], stop=["Stop"])
    content, entries = check_all(deltas)
    assert content == "Hello Stay "
    assert [e["token"] for e in entries] == ["Hello", " St", "ay", " "]


def test_tokens_that_split_characters():
    deltas = engine_tape([b"caf", b"\xc3", b"\xa9", b" \xf0\x9f", b"\x98\x80", b"!"])
    content, entries = check_all(deltas)
    assert content == "café 😀!" and len(entries) == 6


def test_a_stop_string_that_ends_inside_a_split_character():
    deltas = engine_tape([b"a\xc3", b"\xa9b", b"c"], stop=["b"])
    content, entries = check_all(deltas)
    assert content == "aé" and [bytes(e["bytes"]) for e in entries] == [b"a\xc3", b"\xa9"]


def test_text_around_a_tool_call_has_logprobs_the_call_has_none():
    text = "Sure.\n" + CALL + "\nDone"
    tokens = [text[i:i + 3].encode() for i in range(0, len(text), 3)]
    content, entries = check_chat(engine_tape(tokens), tools=True)
    assert content == "Sure.Done" and joined(entries) == b"Sure.Done"
    assert check_responses(engine_tape(tokens), tools=True) == "Sure.Done"


_PIECES = st.sampled_from(["a", "b", " ", "\n", "é", "😀", "中", "END", "<", "tool", ".", "}"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=14), st.data(), st.booleans(),
       st.sampled_from([(), ("END",), ("b a",), ("\n",)]), st.booleans())
def test_any_tokenisation_any_stop(pieces, data, with_call, stop, eos):
    """Random text (with or without a tool call inside), cut into random byte tokens (a token
    may split a character), through the engine's detokenizer: logprobs equal the text."""
    text = "".join(pieces)
    if with_call:
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + CALL + text[at:]
    raw = text.encode()
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(len(raw) - 1, 1)), max_size=30))))
    tokens = [raw[a:b] for a, b in zip([0] + cuts, cuts + [len(raw)]) if raw[a:b]]
    deltas = engine_tape(tokens, stop=stop, eos=eos)
    if "\ufffd" in "".join(d.text for d in deltas):
        return   # a cut left invalid UTF-8 in the text: bytes cannot match U+FFFD
    check_chat(deltas, tools=with_call)
    check_responses(deltas, tools=with_call)
    if not with_call:
        check_all(deltas)
