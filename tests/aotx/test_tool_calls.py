import json

import pytest

from aotx import strict_json
from aotx.chat_types import ToolCall, ToolSpec
from aotx.tool_calls import (ToolCallPiece, named_choice, render_assistant_tool_calls,
                             render_tool_result, render_tools_system)
from aotx.tool_stream import ToolCallStream
from tests.aotx.test_tool_stream import both, run

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


HOSTILE_BODIES = [
    '{"name": "f", "arguments": {"a": NaN}}',       # not JSON: a call with it would put NaN on the wire
    '{"name": "f", "arguments": {"a": -Infinity}}',
    '{"name": "f", "arguments": {"a": 1e999}}',     # overflows to an infinite float
    '{"name": "f", "arguments": {"a": [1, 2.5e400]}}',
    '{"name": "f", "arguments": {"a": ' + "[" * 2000 + "]" * 2000 + "}}",   # would recurse past the stack
    '{"name": "f", "arguments": {"a": ' + "[" * 2000 + "]" * 2000 + "}}}",  # the same, on the repair path
    '{"arguments": {"a": NaN}, "name": "f"}',        # another opening: read whole, by parse_call_body
    '{"name": "f", "arguments": {"a": ' + "1" * 4301 + "}}}",   # past int()'s digit bound, repair path
    '{"arguments": {"a": ' + "1" * 4301 + '}, "name": "f"}}',    # the same, read whole
]


@pytest.mark.parametrize("body", HOSTILE_BODIES)
def test_non_json_numbers_and_deep_nesting_stay_text(body):
    """Such arguments are not JSON (aotx.json_prefix refuses the literal, the overflowing
    digit, the bracket past MAX_JSON_DEPTH) and no bracket repair completes them: buffered, the
    call comes back as the text the model wrote; a stream ends it broken, after fragments that
    are a strict JSON prefix (never NaN, never an infinite number)."""
    from aotx.tool_calls import parse_call_body
    assert parse_call_body(body) is None
    raw = f"<tool_call>\n{body}\n</tool_call>"
    streamed, buffered, reason = both([raw[k:k + 7] for k in range(0, len(raw), 7)], "stop")
    assert buffered == [("text", raw)] and reason == "stop"
    if streamed == buffered:
        return                                   # read whole at </tool_call>: text in both
    for kind, *rest in streamed:
        assert kind == "call" and rest[2] is True, "broken, never a complete call"
        args = rest[1]
        assert "NaN" not in args and "Infinity" not in args and "e999" not in args
        assert strict_json.nesting_depth(args) <= strict_json.MAX_JSON_DEPTH


@pytest.mark.parametrize("arguments", ['{"a": NaN}', '{"a": 1e999}', "[" * 100_000,
                                       '{"a": ' + "[" * 2000 + "]" * 2000 + "}"])
def test_hostile_history_arguments_are_rendered_as_their_string(arguments):
    """An earlier call's arguments are a client's string: read as strict JSON, so NaN and
    nesting that would recurse past the stack stay the string (no RecursionError, no NaN)."""
    text = render_assistant_tool_calls([ToolCall("call_1", "f", arguments)])
    assert strict_json.loads(text.split("\n")[1])["arguments"] == arguments


def test_the_stream_reads_history_it_rendered():
    s = ToolCallStream(broken_as_text=True)
    text = render_assistant_tool_calls([ToolCall("call_1", "f", '{"a": [1, {"b": null}]}')])
    pieces = s.feed(text) + s.finish("stop")
    assert [type(p).__name__ for p in pieces] == ["CallStart", "CallArgs", "CallEnd"]
    assert s.finish_reason == "tool_calls"
