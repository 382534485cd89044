import json

import pytest

from aotx.chat_types import ToolCall, ToolSpec
from aotx.tool_calls import (ToolCallPiece, named_choice, render_assistant_tool_calls,
                             render_tool_result, render_tools_system)
from tests.aotx.test_tool_stream import run

TOOLS = [ToolSpec("f", "does f", {"type": "object", "properties": {"a": {"type": "integer"}}})]


def test_render_tools_system_modes():
    auto = render_tools_system(TOOLS, "auto")
    assert "<tools>" in auto and '"name": "f"' in auto and "<tool_call>" in auto
    assert json.loads(auto.split("<tools>\n")[1].split("\n</tools>")[0])["function"]["name"] == "f"
    assert "must call at least one" in render_tools_system(TOOLS, "required")
    assert 'must call the function "f"' in render_tools_system(TOOLS, named_choice("f"))
    assert render_tools_system(TOOLS, "none") == "" and render_tools_system([], "auto") == ""


def test_render_history_round_trips_through_parser():
    text = render_assistant_tool_calls([ToolCall("call_1", "f", '{"a":1}')])
    assert run([text]) == [("call", "f", '{"a": 1}', False)]
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
