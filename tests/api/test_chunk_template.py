"""Chat and Completions chunks are written from a template (the head encoded once per stream, a plain
content chunk without building its dict, a plain token's text taken without the decoder's pieces): the bytes
on the wire are exactly what encoding every chunk's whole object gave (the reference below is that former
encoding and every delta through ChoiceDecoder.feed, kept here)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from api.decode import ChoiceDecoder
from api.sse import ServerSentEvent
from api.surfaces.chat.stream import ChatStreamProjector
from api.surfaces.completions.stream import CompletionStreamProjector
from tests.api.tapes import CASES, run, tape


def _whole_object_chunk(self, choices, usage=None):
    data = {**self._head, "choices": choices}
    if self._include_usage:
        data["usage"] = usage
    return ServerSentEvent(data)


class _FullDecoder(ChoiceDecoder):
    def plain_text(self, delta):
        return None                                      # every delta through feed()


class _ChatReference(ChatStreamProjector):
    _chunk = _whole_object_chunk

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._decoders = [_FullDecoder(kw["parse_tools"], kw.get("tool_primer", ""), kw["logprobs"])
                          for _ in self._decoders]

    def _content(self, i, text):
        return self._chunk([self._choice(i, {"content": text})])


class _CompletionReference(CompletionStreamProjector):
    _chunk = _whole_object_chunk

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        for choice in self._choices:
            choice.decoder = _FullDecoder(parse_tools=False, logprobs=kw["logprobs"] is not None)


_HEAD = dict(id="chatcmpl-x\"é", created=1796159240, model="smollm2-135m-instruct", fingerprint="fp_c77a1476bd")
texts = st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=6)   # any code point but surrogates


def test_a_plain_content_chunk_has_the_exact_wire_form():
    p = ChatStreamProjector(**_HEAD, n=1, parse_tools=False, include_usage=True, logprobs=False)
    p.open()
    [event] = p.feed(0, tape(['a "q"\\\n\u2028é😀'])[0])
    assert event.encode() == (
        'data: {"id":"chatcmpl-x\\"é","object":"chat.completion.chunk","created":1796159240,'
        '"model":"smollm2-135m-instruct","system_fingerprint":"fp_c77a1476bd","choices":[{"index":0,'
        '"delta":{"content":"a \\"q\\"\\\\\\n\u2028é😀"},"logprobs":null,"finish_reason":null}],'
        '"usage":null}\n\n').encode()


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(texts, min_size=1, max_size=3), include_usage=st.booleans(),
       logprobs=st.booleans(), finish=st.sampled_from(["stop", "length"]))
def test_chat_streams_are_byte_identical_to_whole_object_encoding(pieces, include_usage, logprobs, finish):
    tapes = [tape(p, finish, logprobs=logprobs) for p in pieces]
    args = dict(**_HEAD, n=len(tapes), parse_tools=False, include_usage=include_usage, logprobs=logprobs)
    assert run(ChatStreamProjector(**args), tapes) == run(_ChatReference(**args), tapes)


@settings(max_examples=40, deadline=None)
@given(pieces=st.lists(texts, min_size=1, max_size=3), include_usage=st.booleans(),
       logprobs=st.sampled_from([None, 0, 2]), echo=st.sampled_from([None, "", "Say \"hi\":"]))
def test_completion_streams_are_byte_identical_to_whole_object_encoding(pieces, include_usage, logprobs, echo):
    tapes = [tape(p, logprobs=logprobs is not None) for p in pieces]
    args = dict(**_HEAD, n=1, echo_texts=[echo] * len(tapes), logprobs=logprobs, include_usage=include_usage)
    assert run(CompletionStreamProjector(**args), tapes) == run(_CompletionReference(**args), tapes)


def test_every_tape_case_is_byte_identical_on_both_surfaces(monkeypatch):
    monkeypatch.setattr("api.surfaces.chat.stream.new_id", lambda prefix: prefix + "fixed")   # tool call ids
    for case in CASES:
        for include_usage in (False, True):
            args = dict(**_HEAD, n=1, parse_tools=case.tools, include_usage=include_usage, logprobs=case.logprobs)
            assert run(ChatStreamProjector(**args), [case.deltas]) == run(_ChatReference(**args), [case.deltas])
            args = dict(**_HEAD, n=1, echo_texts=[None], logprobs=2 if case.logprobs else None,
                        include_usage=include_usage)
            assert (run(CompletionStreamProjector(**args), [case.deltas])
                    == run(_CompletionReference(**args), [case.deltas]))


def _run_plain_first(projector, tapes) -> bytes:
    """`run`, but each delta offered to `plain_bytes` first and fed only where it answers None (as
    api.runner._stream_events does)."""
    out = b"".join(e.encode() for e in projector.open())
    cursors = [0] * len(tapes)
    while not projector.done and any(c < len(t) for c, t in zip(cursors, tapes)):
        for i, t in enumerate(tapes):
            if cursors[i] < len(t) and not projector.done:
                data = projector.plain_bytes(i, t[cursors[i]])
                out += data if data is not None else b"".join(e.encode() for e in projector.feed(i, t[cursors[i]]))
                cursors[i] += 1
    assert projector.done
    return out


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(texts, min_size=1, max_size=3), include_usage=st.booleans(),
       logprobs=st.booleans(), finish=st.sampled_from(["stop", "length"]))
def test_chat_plain_bytes_then_feed_is_byte_identical(pieces, include_usage, logprobs, finish):
    tapes = [tape(p, finish, logprobs=logprobs) for p in pieces]
    args = dict(**_HEAD, n=len(tapes), parse_tools=False, include_usage=include_usage, logprobs=logprobs)
    assert _run_plain_first(ChatStreamProjector(**args), tapes) == run(_ChatReference(**args), tapes)


def test_every_tape_case_is_byte_identical_through_plain_bytes(monkeypatch):
    monkeypatch.setattr("api.surfaces.chat.stream.new_id", lambda prefix: prefix + "fixed")   # tool call ids
    for case in CASES:
        for include_usage in (False, True):
            args = dict(**_HEAD, n=1, parse_tools=case.tools, include_usage=include_usage, logprobs=case.logprobs)
            assert (_run_plain_first(ChatStreamProjector(**args), [case.deltas])
                    == run(_ChatReference(**args), [case.deltas]))
