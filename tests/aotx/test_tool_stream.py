"""aotx.tool_stream: model output -> text and tool calls, arguments streamed as written."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jiter import from_json

from aotx import strict_json
from aotx.chat_types import ToolSpec
from aotx.tool_calls import forced_call_primer
from aotx.tool_stream import BudgetCut, CallArgs, CallEnd, CallStart, TextPiece, ToolCallStream
from tests.aotx.model_text import model_text, split

CALL = '<tool_call>\n{"name": "f", "arguments": {"a": 1, "s": "é"}}\n</tool_call>'
ARGS = '{"a": 1, "s": "é"}'


def pieces_of(chunks, finish="stop", primer="", as_text=False):
    s = ToolCallStream(broken_as_text=as_text)
    assert s.feed(primer) == []
    return [p for chunk in chunks for p in s.feed(chunk)] + s.finish(finish), s


def run(chunks, finish="stop", primer="", as_text=False):
    """("text", s) with adjacent text merged, ("call", name, arguments, broken) per call."""
    return _assemble(chunks, finish, primer, as_text)[0]


def both(chunks, finish="stop", primer=""):
    """The stream's and the buffered reading (broken_as_text) of the same output, and the
    finish reason they share."""
    streamed, reason = _assemble(chunks, finish, primer, False)
    buffered, same = _assemble(chunks, finish, primer, True)
    assert same == reason, "both readings finish alike"
    assert not any(o[0] == "call" and o[3] for o in buffered), "no broken call when buffered"
    assert [o for o in buffered if o[0] == "call"] == [
        o for o in streamed if o[0] == "call" and not o[3]], "the complete calls are the same"
    return streamed, buffered, reason


def _assemble(chunks, finish, primer, as_text):
    pieces, stream = pieces_of(chunks, finish, primer, as_text)
    fed = primer + "".join(chunks)
    out = []
    for p in pieces:
        if isinstance(p, TextPiece):
            assert fed[p.start:p.start + len(p.text)] == p.text, "start is where the text was fed"
            if out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + p.text)
            else:
                out.append(("text", p.text))
        elif isinstance(p, CallStart):
            out.append(["call", p.name, "", None])
        elif isinstance(p, CallArgs):
            assert out[-1][0] == "call" and out[-1][3] is None, "fragments belong to an open call"
            out[-1][2] += p.text
        else:
            assert isinstance(p, CallEnd) and out[-1][3] is None
            out[-1][3] = p.broken
    assert all(o[0] == "text" or o[3] is not None for o in out), "every call ends"
    return [tuple(o) for o in out], stream.finish_reason


def test_whole_call_in_one_feed():
    assert run([CALL]) == [("call", "f", ARGS, False)]


def test_call_split_across_many_feeds():
    assert run([CALL[i:i + 2] for i in range(0, len(CALL), 2)]) == [("call", "f", ARGS, False)]


def test_arguments_stream_before_the_call_closes():
    s = ToolCallStream()
    assert s.feed('<tool_call>\n{"name": "f", ') == []
    assert s.feed('"arguments": {"a"') == [CallStart("f"), CallArgs('{"a"')]
    assert s.feed(': 1, "s": "é') == [CallArgs(': 1, "s": "é')]
    assert s.feed('"}') == [CallArgs('"}'), CallEnd()]     # the object closed: the call is done
    assert s.feed('}\n</tool_call>') == [] and s.finish("stop") == []


def test_text_passes_through_immediately_and_tag_prefix_is_held():
    s = ToolCallStream()
    assert s.feed("Hello <tool") == [TextPiece("Hello", 0)]
    assert s.feed("box>") == [TextPiece(" <toolbox>", 5)]
    assert s.feed("<tool_") == []
    assert s.feed("call>" + CALL[11:])[:1] == [CallStart("f")]


def test_text_then_call_then_text():
    assert run(["Checking.\n", CALL, "\nDone"]) == [
        ("text", "Checking."), ("call", "f", ARGS, False), ("text", "Done")]


def test_several_calls_whitespace_between_dropped():
    assert run([CALL, "\n\n", CALL.replace("1", "2"), "\n"]) == [
        ("call", "f", ARGS, False), ("call", "f", ARGS.replace("1", "2"), False)]


def test_parameters_key_and_the_models_own_argument_text():
    assert run(['<tool_call>{"name":"f","parameters":{"x":[1, 2]}}</tool_call>']) == [
        ("call", "f", '{"x":[1, 2]}', False)]


def test_other_openings_are_read_whole_at_the_close():
    raw = '<tool_call>{"arguments": {"x": 1}, "name": "f"}</tool_call>'
    s = ToolCallStream()
    assert s.feed(raw[:-12]) == []
    assert s.feed(raw[-12:]) == [CallStart("f"), CallArgs('{"x": 1}'), CallEnd()]


@pytest.mark.parametrize("body", ['not json', '{"name": 3, "arguments": {}}',
                                  '{"name": "f", "arguments": "x"}', '[1]', '{"name": "", "arguments": {}}'])
def test_malformed_body_is_text(body):
    raw = f"<tool_call>{body}</tool_call>"
    assert run([raw]) == [("text", raw)]
    assert run(["Hi ", raw]) == [("text", "Hi " + raw)]      # the space before it stays


def test_call_cut_before_it_started_is_raw_text():
    raw = '<tool_call>{"name": "f", "argu'
    streamed, buffered, reason = both([raw[:5], raw[5:]], "length")
    assert streamed == buffered == [("text", raw)] and reason == "length"


def test_unrepairable_budget_cut_streams_a_broken_call_and_buffers_the_raw_text():
    """Seed 001: the partial call returns as assistant content, the finish stays "length".
    A stream has sent the fragments already: there the call ends broken."""
    raw = '<tool_call>{"name": "f", "arguments": {"a": "Par'
    streamed, buffered, reason = both(["Sure. ", raw[:20], raw[20:]], "length")
    assert streamed == [("text", "Sure."), ("call", "f", '{"a": "Par', True)]
    assert buffered == [("text", "Sure. " + raw)] and reason == "length"


@pytest.mark.parametrize("tail,args", [
    ('{"a": 1', '{"a": 1}'),                       # one bracket closes it
    ('{"a": [1, {"b": 2}', '{"a": [1, {"b": 2}]}'),  # two do
    ('{"a": 1}', '{"a": 1}'),                      # the arguments were complete: the outer } missing
    ('{"a": 1}}\n</tool', '{"a": 1}'),            # cut inside the close tag
])
def test_repairable_budget_cut_completes_to_tool_calls(tail, args):
    """Seed 001: "a repairable one still ... completes to tool_calls"."""
    chunks = ['<tool_call>{"name": "f", "arguments": ', tail]
    streamed, buffered, reason = both(chunks, "length")
    assert streamed == buffered == [("call", "f", args, False)] and reason == "tool_calls"
    s = ToolCallStream()
    s.feed("".join(chunks))
    s.finish("length")
    assert s.budget_cut == BudgetCut("f", True)


def test_budget_cut_outside_a_call_stays_length():
    streamed, buffered, reason = both([CALL, "\nDone and"], "length")
    assert streamed == buffered == [("call", "f", ARGS, False), ("text", "Done and")]
    assert reason == "length"
    s = ToolCallStream()
    s.feed(CALL)
    s.finish("length")
    assert s.budget_cut is None


def test_tag_prefix_at_finish_is_text():
    assert run(["so <tool_c"]) == [("text", "so <tool_c")]


def test_utf8_text_and_trailing_whitespace_kept_without_calls():
    assert run(["café ", "中文\n"]) == [("text", "café 中文\n")]


@pytest.mark.parametrize("tail,args", [
    ('{"a": 1}\n</tool_call>', '{"a": 1}'),                 # outer brace missing: nothing to repair
    ('{"a": {"b": 2}\n</tool_call>', '{"a": {"b": 2}}'),    # the arguments' own brace missing
    ('{"a": [1, 2\n</tool_call>', '{"a": [1, 2]}'),
    ('{"a": 1}}}}}</tool_call>', '{"a": 1}'),               # extra braces after them: dropped
    ('{"a": {"b": 2', '{"a": {"b": 2}}'),                   # the model stopped (EOS)
    ('{"a": 1] and more', '{"a": 1}'),                      # not JSON any more
])
def test_repair_is_the_last_fragment(tail, args):
    s = ToolCallStream()
    s.feed('<tool_call>{"name": "f", "arguments": ')
    pieces = [p for c in tail for p in s.feed(c)] + s.finish("stop")
    frags = [p.text for p in pieces if isinstance(p, CallArgs)]
    assert "".join(frags) == args and json.loads(args)
    assert pieces[-1] == CallEnd()


@pytest.mark.parametrize("tail,args", [
    ('{"a": {"b": {"c": 1\n</tool_call>', '{"a": {"b": {"c": 1'),   # three missing: too many
    ('{"a": "x</tool_call>', '{"a": "x'),                            # an open string
    ('{"a": "x\ny"}</tool_call>', '{"a": "x'),                       # not JSON: a raw newline
    ('{"a": \n</tool_call>', '{"a":'),                               # a missing value
])
def test_beyond_repair_a_stream_ends_the_call_broken_and_buffered_has_the_text(tail, args):
    head = '<tool_call>{"name": "f", "arguments": '
    streamed, buffered, reason = both(["Hi ", head, tail, "\nok"])
    assert streamed == [("text", "Hi"), ("call", "f", args, True), ("text", "ok")]
    assert buffered == [("text", "Hi " + head + tail + "\nok")]    # all of it, as written
    assert reason == "stop", "no complete call was made"


def test_a_broken_call_beside_a_complete_one():
    broken = '<tool_call>{"name": "g", "arguments": {"a": tru}}</tool_call>'
    streamed, buffered, reason = both([CALL, "\n", broken, "\n", CALL])
    assert streamed == [("call", "f", ARGS, False), ("call", "g", '{"a": tru', True),
                        ("call", "f", ARGS, False)]
    # whitespace right before a call is dropped, as after any text
    assert buffered == [("call", "f", ARGS, False), ("text", broken), ("call", "f", ARGS, False)]
    assert reason == "tool_calls"


def test_text_after_a_call_and_a_new_call_without_a_close():
    text = ('<tool_call>{"name": "f", "arguments": {"a": 1}}\n\nSo it is.\n'
            '<tool_call>{"name": "g", "arguments": {}}}<tool_call>{"name": "h", "arguments": {}}')
    assert run([text]) == [("call", "f", '{"a": 1}', False), ("call", "g", "{}", False),
                           ("call", "h", "{}", False)]


def test_close_tag_ends_the_call_even_inside_a_string():
    chunks = ['<tool_call>{"name": "f", "arguments": {"a": "x</tool', '_call>ok']
    assert run(chunks) == [("call", "f", '{"a": "x', True), ("text", "ok")]
    assert run(chunks, as_text=True) == [("text", "".join(chunks))]


def test_forced_primer_plus_model_output_is_one_call():
    primer = forced_call_primer([ToolSpec("get_weather")], "required")
    out = run(["\n", '{"', 'city', '":', ' "', 'Paris', '"}', "}\n", "</", "tool_call>"],
              primer=primer)
    assert out == [("call", "get_weather", '{"city": "Paris"}', False)]


_ARGS = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8) |
                        st.lists(st.booleans(), max_size=3), max_size=4)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=12), st.lists(_ARGS, min_size=1, max_size=3), st.text(max_size=12),
       st.data())
def test_any_split_gives_the_calls_of_the_whole_text(before, calls, after, data):
    """However the output is cut into deltas, the pieces assemble to the same text and calls."""
    text = before.replace("<", "") + "".join(
        f'<tool_call>\n{{"name": "f", "arguments": {json.dumps(a, ensure_ascii=False)}}}\n</tool_call>'
        for a in calls) + after.replace("<", "")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    chunks = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    whole = run([text])
    assert run(chunks) == whole
    assert run(chunks, as_text=True) == whole
    assert [o[2] for o in whole if o[0] == "call"] == [json.dumps(a, ensure_ascii=False)
                                                        for a in calls]


@settings(max_examples=200, deadline=None)
@given(model_text, st.data(), st.sampled_from(["stop", "length", None]))
def test_any_model_text_split_anywhere_reads_alike_streamed_and_buffered(text, data, finish):
    """Hostile text inside calls, split anywhere: no exception; every fragment stream keeps
    the arguments a strict JSON prefix; the buffered reading's calls are the stream's complete
    ones and their arguments are strict JSON (a broken call is text there); both finish alike;
    the buffered text, broken calls and all, is at the offsets it was fed."""
    chunks = split(data, text)
    streamed, buffered, reason = both(chunks, finish)
    for kind, *rest in buffered:
        if kind == "call":
            assert isinstance(strict_json.loads(rest[1]), dict)
    for kind, *rest in streamed:
        if kind == "call":
            # the SDKs' reading never fails, and finds no NaN or infinite number
            strict_json.dumps(from_json(rest[1].encode(), partial_mode=True))
            assert strict_json.nesting_depth(rest[1]) <= strict_json.MAX_JSON_DEPTH
            assert rest[2] == (not _strict(rest[1])), "broken exactly when not strict JSON"
    assert run(chunks, finish) == run(["".join(chunks)], finish), "the split changes nothing"
    assert reason in ("stop", "length", "tool_calls", None)


def _strict(text: str) -> bool:
    try:
        strict_json.loads(text)
    except ValueError:
        return False
    return True
