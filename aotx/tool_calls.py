"""Hermes-style tool calling for a model without native tool support.

Prompt side: the tools are listed as JSON inside <tools></tools> in a system
block and the model is told to answer with
<tool_call>{"name": ..., "arguments": {...}}</tool_call>. Earlier calls and
their results are rendered back into the same tag format.

Output side: `parse_call_body` reads one whole call body; aotx.tool_stream
splits generated text into text and calls incrementally, streaming each call's
arguments as they are written. Pure: no I/O.

Tool choice is a string: None or "auto" (the model decides), "none" (no tools
shown), "required" (must call one), or `named_choice(name)` (must call that
one).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from aotx import strict_json
from aotx.chat_types import ToolCall, ToolSpec

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_NAMED_PREFIX = "function:"


def named_choice(name: str) -> str:
    """The tool_choice string that forces the tool `name`."""
    return _NAMED_PREFIX + name


def forced_tool_name(tool_choice: str | None) -> str | None:
    if tool_choice and tool_choice.startswith(_NAMED_PREFIX):
        return tool_choice[len(_NAMED_PREFIX):]
    return None


def tools_active(tools: Sequence[ToolSpec], tool_choice: str | None) -> bool:
    """Whether the prompt offers tools (and so the output must be parsed for calls)."""
    return bool(tools) and tool_choice != "none"


def forced_call_primer(tools: Sequence[ToolSpec], tool_choice: str | None) -> str:
    """Text that opens the assistant turn when a call is mandatory, so a small model
    that would otherwise answer in prose starts the call it was told to make.

    "required" opens the call up to the function name (up to the arguments when
    only one tool is offered); a named choice opens it up to the arguments. The output parser is fed the same text first, so the
    call it reads is the primer plus what the model wrote. "" when the model
    chooses freely.
    """
    if not tools_active(tools, tool_choice):
        return ""
    forced = forced_tool_name(tool_choice)
    if forced is None and tool_choice == "required" and len(tools) == 1:
        forced = tools[0].name
    if forced is not None:
        return f'{OPEN_TAG}\n{{"name": {json.dumps(forced, ensure_ascii=False)}, "arguments": '
    if tool_choice == "required":
        return f'{OPEN_TAG}\n{{"name": "'
    return ""


def _tool_json(tool: ToolSpec) -> str:
    spec = {"type": "function", "function": {
        "name": tool.name, "description": tool.description,
        "parameters": tool.parameters or {"type": "object", "properties": {}}}}
    return json.dumps(spec, ensure_ascii=False)


def render_tools_system(tools: Sequence[ToolSpec], tool_choice: str | None = None) -> str:
    """The system text that offers `tools`; "" when there is nothing to offer."""
    if not tools_active(tools, tool_choice):
        return ""
    listing = "\n".join(_tool_json(t) for t in tools)
    forced = forced_tool_name(tool_choice)
    if forced is not None:
        rule = (f"You must call the function \"{forced}\" now, exactly once, and write nothing "
                "else.")
    elif tool_choice == "required":
        rule = "You must call at least one of these functions now; write no other text."
    else:
        rule = ("Call a function only when it helps to answer; otherwise answer normally "
                "in plain text.")
    return (
        "# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{listing}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n"
        f'{OPEN_TAG}\n{{"name": <function-name>, "arguments": <args-json-object>}}\n{CLOSE_TAG}\n\n'
        + rule
    )


def _arguments_object(arguments: str) -> object:
    """An earlier call's arguments (a client's string) as the object to render; read as strict
    JSON, so NaN, overflowing numbers and hostile nesting stay the string they were."""
    try:
        return strict_json.loads(arguments) if arguments.strip() else {}
    except (json.JSONDecodeError, strict_json.JsonInputError):
        return arguments  # shown as the string it was; never invented


def render_assistant_tool_calls(calls: Sequence[ToolCall]) -> str:
    """An earlier assistant turn's calls, in the format the model is asked to produce."""
    parts = []
    for call in calls:
        body = {"name": call.name, "arguments": _arguments_object(call.arguments)}
        parts.append(f"{OPEN_TAG}\n{json.dumps(body, ensure_ascii=False)}\n{CLOSE_TAG}")
    return "\n".join(parts)


def render_tool_result(content: str, name: str | None = None) -> str:
    """One tool result as the model sees it."""
    if name:
        body = json.dumps({"name": name, "content": content}, ensure_ascii=False)
    else:
        body = content
    return f"<tool_response>\n{body}\n</tool_response>"


@dataclass(frozen=True)
class ToolCallPiece:
    """One call read whole by `parse_call_body`."""
    name: str
    arguments: str  # compact JSON object


MAX_REPAIRED_BRACES = 2


def _call_object(body: str) -> object:
    """The JSON object of a closed call body, repairing only unbalanced closing braces.

    A small model often drops or doubles the final "}" of the outer object. Such a
    body is repaired by adding up to two missing "}" or dropping extra trailing ones;
    anything else that is not JSON stays unparsed (None), and comes back as text.
    """
    text = body.strip()
    for attempt in [text] + [text + "}" * n for n in range(1, MAX_REPAIRED_BRACES + 1)]:
        try:
            return strict_json.loads(attempt)
        except (json.JSONDecodeError, strict_json.JsonInputError):  # NaN, 1e999, deep nesting: not a call
            pass
    try:
        strict_json.check_depth(text)
        obj, end = strict_json.decoder().raw_decode(text)
    except ValueError:   # not JSON, a strict_json bound, or an integer past int()'s digit bound
        return None
    rest = text[end:].strip()
    return obj if rest and set(rest) == {"}"} and len(rest) <= MAX_REPAIRED_BRACES else None


def parse_call_body(body: str) -> ToolCallPiece | None:
    """The call in a <tool_call> body, or None when it is not a well-formed call."""
    obj = _call_object(body)
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    key = "arguments" if "arguments" in obj else "parameters" if "parameters" in obj else None
    args = obj[key] if key else {}
    if not isinstance(args, dict):
        return None
    return ToolCallPiece(obj["name"], json.dumps(args, ensure_ascii=False))
