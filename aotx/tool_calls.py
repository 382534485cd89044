"""Hermes-style tool calling for a model without native tool support.

Prompt side: the tools are listed as JSON inside <tools></tools> in a system
block and the model is told to answer with
<tool_call>{"name": ..., "arguments": {...}}</tool_call>. Earlier calls and
their results are rendered back into the same tag format.

Output side: `ToolCallStream` splits generated text into plain text pieces and
complete tool calls, incrementally, holding back only what could still be the
start of a <tool_call> tag. Pure: no I/O.

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
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
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
class TextPiece:
    text: str


@dataclass(frozen=True)
class ToolCallPiece:
    name: str
    arguments: str  # compact JSON object


Piece = TextPiece | ToolCallPiece


_MAX_REPAIRED_BRACES = 2


def _call_object(body: str) -> object:
    """The JSON object of a closed call body, repairing only unbalanced closing braces.

    A small model often drops or doubles the final "}" of the outer object. Such a
    body is repaired by adding up to two missing "}" or dropping extra trailing ones;
    anything else that is not JSON stays unparsed (None), and comes back as text.
    """
    text = body.strip()
    for attempt in [text] + [text + "}" * n for n in range(1, _MAX_REPAIRED_BRACES + 1)]:
        try:
            return strict_json.loads(attempt)
        except (json.JSONDecodeError, strict_json.JsonInputError):  # NaN, 1e999, deep nesting: not a call
            pass
    try:
        strict_json.check_depth(text)
        obj, end = strict_json.decoder().raw_decode(text)
    except (json.JSONDecodeError, strict_json.JsonInputError):
        return None
    rest = text[end:].strip()
    return obj if rest and set(rest) == {"}"} and len(rest) <= _MAX_REPAIRED_BRACES else None


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


def _tag_prefix_len(text: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of OPEN_TAG."""
    for n in range(min(len(text), len(OPEN_TAG) - 1), 0, -1):
        if OPEN_TAG.startswith(text[-n:]):
            return n
    return 0


class ToolCallStream:
    """Incremental splitter of model output into text and tool calls.

    Whitespace directly before a <tool_call> or after a </tool_call> is dropped
    (so nothing is emitted between consecutive calls); any other text passes
    through as soon as it cannot be the start of a tag.
    """

    def __init__(self) -> None:
        self._buf = ""          # unprocessed text
        self._inside = False    # between <tool_call> and </tool_call>
        self._ws = ""           # trailing whitespace held: it may precede a tag
        self._after_call = False
        self.calls = 0          # tool calls emitted so far

    def feed(self, text: str) -> list[Piece]:
        self._buf += text
        out: list[Piece] = []
        while True:
            if self._inside:
                end = self._buf.find(CLOSE_TAG)
                if end < 0:
                    return out
                body, self._buf = self._buf[:end], self._buf[end + len(CLOSE_TAG):]
                self._inside = False
                call = parse_call_body(body)
                if call is None:
                    self._emit_text(out, OPEN_TAG + body + CLOSE_TAG)
                else:
                    self._ws = ""
                    self._after_call = True
                    self.calls += 1
                    out.append(call)
                continue
            start = self._buf.find(OPEN_TAG)
            if start >= 0:
                self._emit_text(out, self._buf[:start])
                self._ws = ""  # whitespace before a tag is dropped
                self._buf = self._buf[start + len(OPEN_TAG):]
                self._inside = True
                continue
            keep = _tag_prefix_len(self._buf)
            ready = self._buf[:len(self._buf) - keep]
            self._buf = self._buf[len(self._buf) - keep:]
            self._emit_text(out, ready)
            return out

    def finish(self, finish_reason: str | None = None) -> list[Piece]:
        """Flush at the end of generation. A call still open (cut by the budget or a
        stop) comes back as its raw text, never as a call."""
        out: list[Piece] = []
        if self._inside:
            raw = self._ws + OPEN_TAG + self._buf
            self._ws = ""
            out.append(TextPiece(raw))
        else:
            tail = self._buf
            if not self._after_call:
                tail = self._ws + tail
            elif tail.strip():
                tail = tail.lstrip()
            else:
                tail = ""
            if tail:
                out.append(TextPiece(tail))
        self._buf, self._ws, self._inside = "", "", False
        return out

    def _emit_text(self, out: list[Piece], text: str) -> None:
        if not text:
            return
        if self._after_call:
            text = text.lstrip()
            if not text:
                return
            self._after_call = False
        text = self._ws + text
        body = text.rstrip()
        self._ws = text[len(body):]
        if body:
            if out and isinstance(out[-1], TextPiece):
                out[-1] = TextPiece(out[-1].text + body)
            else:
                out.append(TextPiece(body))
