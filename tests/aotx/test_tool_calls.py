import json

import pytest

from aotx.chat_types import ToolCall, ToolSpec
from aotx.tool_calls import (TextPiece, ToolCallPiece, ToolCallStream, named_choice,
                             render_assistant_tool_calls, render_tool_result, render_tools_system)

CALL = '<tool_call>\n{"name": "f", "arguments": {"a": 1, "s": "é"}}\n</tool_call>'
ARGS = '{"a": 1, "s": "é"}'
TOOLS = [ToolSpec("f", "does f", {"type": "object", "properties": {"a": {"type": "integer"}}})]


def run(pieces, finish="stop"):
    s = ToolCallStream()
    out = [p for chunk in pieces for p in s.feed(chunk)] + s.finish(finish)
    merged = []
    for p in out:
        if merged and isinstance(p, TextPiece) and isinstance(merged[-1], TextPiece):
            merged[-1] = TextPiece(merged[-1].text + p.text)
        else:
            merged.append(p)
    return merged


def test_whole_call_in_one_feed():
    assert run([CALL]) == [ToolCallPiece("f", ARGS)]


def test_call_split_across_many_feeds():
    assert run([CALL[i:i + 2] for i in range(0, len(CALL), 2)]) == [ToolCallPiece("f", ARGS)]


def test_text_passes_through_immediately_and_tag_prefix_is_held():
    s = ToolCallStream()
    assert s.feed("Hello <tool") == [TextPiece("Hello")]
    assert s.feed("box>") == [TextPiece(" <toolbox>")]
    assert s.feed("<tool_") == []
    assert s.feed("call>" + CALL[11:]) == [ToolCallPiece("f", ARGS)]


def test_text_then_call_then_text():
    assert run(["Checking.\n", CALL, "\nDone"]) == [
        TextPiece("Checking."), ToolCallPiece("f", ARGS), TextPiece("Done")]


def test_whitespace_between_calls_dropped():
    assert run([CALL, "\n\n", CALL, "\n"]) == [ToolCallPiece("f", ARGS)] * 2


def test_parameters_key_and_compact_arguments():
    assert run(['<tool_call>{"name":"f","parameters":{"x":[1, 2]}}</tool_call>']) == [
        ToolCallPiece("f", '{"x": [1, 2]}')]


@pytest.mark.parametrize("body", ['not json', '{"name": 3, "arguments": {}}',
                                  '{"name": "f", "arguments": "x"}', '[1]'])
def test_malformed_body_is_text(body):
    raw = f"<tool_call>{body}</tool_call>"
    assert run([raw]) == [TextPiece(raw)]


def test_call_cut_by_budget_is_raw_text_never_a_call():
    raw = '<tool_call>{"name": "f", "argu'
    assert run([raw[:5], raw[5:]], "length") == [TextPiece(raw)]


def test_tag_prefix_at_finish_is_text():
    assert run(["so <tool_c"]) == [TextPiece("so <tool_c")]


def test_utf8_text_and_trailing_whitespace_kept_without_calls():
    assert run(["café ", "中文\n"]) == [TextPiece("café 中文\n")]


def test_render_tools_system_modes():
    auto = render_tools_system(TOOLS, "auto")
    assert "<tools>" in auto and '"name": "f"' in auto and "<tool_call>" in auto
    assert json.loads(auto.split("<tools>\n")[1].split("\n</tools>")[0])["function"]["name"] == "f"
    assert "must call at least one" in render_tools_system(TOOLS, "required")
    assert 'must call the function "f"' in render_tools_system(TOOLS, named_choice("f"))
    assert render_tools_system(TOOLS, "none") == "" and render_tools_system([], "auto") == ""


def test_render_history_round_trips_through_parser():
    text = render_assistant_tool_calls([ToolCall("call_1", "f", '{"a":1}')])
    assert run([text]) == [ToolCallPiece("f", '{"a": 1}')]
    assert render_tool_result("sunny", "f") == (
        '<tool_response>\n{"name": "f", "content": "sunny"}\n</tool_response>')
    assert render_tool_result("sunny") == "<tool_response>\nsunny\n</tool_response>"


def test_forced_call_primer_opens_the_call():
    from aotx.tool_calls import forced_call_primer, named_choice
    one = [ToolSpec("get_weather")]
    two = [ToolSpec("get_weather"), ToolSpec("get_time")]
    assert forced_call_primer(one, None) == "" and forced_call_primer(one, "auto") == ""
    assert forced_call_primer(one, "none") == ""
    assert forced_call_primer(two, "required") == '<tool_call>\n{"name": "'
    assert forced_call_primer(one, "required") == '<tool_call>\n{"name": "get_weather", "arguments": '
    assert forced_call_primer(two, named_choice("get_time")) == \
        '<tool_call>\n{"name": "get_time", "arguments": '


def test_primer_plus_model_output_parses_as_one_call():
    from aotx.tool_calls import forced_call_primer
    stream = ToolCallStream()
    primer = forced_call_primer([ToolSpec("get_weather")], "required")
    assert stream.feed(primer) == []
    pieces = stream.feed('{"city": "Paris"}}\n</tool_call>') + stream.finish("stop")
    assert pieces == [ToolCallPiece("get_weather", '{"city": "Paris"}')]


@pytest.mark.parametrize("body,args", [
    ('{"name": "f", "arguments": {"a": 1}', '{"a": 1}'),            # outer brace missing
    ('{"name": "f", "arguments": {"a": {"b": 2}', '{"a": {"b": 2}}'),  # two missing
    ('{"name": "f", "arguments": {"a": 1}}}', '{"a": 1}'),          # one extra
])
def test_unbalanced_closing_braces_are_repaired(body, args):
    from aotx.tool_calls import parse_call_body
    assert parse_call_body(body) == ToolCallPiece("f", args)


@pytest.mark.parametrize("body", [
    '{"name": "f", "arguments": {"a": 1}}}}}',     # three extra braces
    '{"name": "f", "arguments": {"a": {"b": 1',    # three missing
    '{"name": "f", "arguments": {"a": 1}} trailing words',
])
def test_other_malformed_bodies_stay_text(body):
    from aotx.tool_calls import parse_call_body
    assert parse_call_body(body) is None


@pytest.mark.parametrize("body", [
    '{"name": "f", "arguments": {"a": NaN}}',       # not JSON: a call with it would put NaN on the wire
    '{"name": "f", "arguments": {"a": -Infinity}}',
    '{"name": "f", "arguments": {"a": 1e999}}',     # overflows to an infinite float
    '{"name": "f", "arguments": {"a": ' + "[" * 2000 + "]" * 2000 + "}}",   # would recurse past the stack
    '{"name": "f", "arguments": {"a": ' + "[" * 2000 + "]" * 2000 + "}}}",  # the same, on the repair path
])
def test_non_json_numbers_and_deep_nesting_stay_text(body):
    from aotx.tool_calls import parse_call_body
    assert parse_call_body(body) is None
    stream = ToolCallStream()
    pieces = stream.feed(f"<tool_call>\n{body}\n</tool_call>") + stream.finish("stop")
    assert all(isinstance(p, TextPiece) for p in pieces)
