"""The Lark grammar (llguidance's dialect) of tool calls in aotx.tool_calls' format.

A call is ``<tool_call>\\n{"name": NAME, "arguments": ARGS}\\n</tool_call>``; calls are separated by
one newline. ARGS follows the tool's schema when the tool is strict, else it is any JSON object
(the parser needs an object). The grammar covers what the model writes AFTER the primer
(aotx.tool_calls.forced_call_primer), which the prompt already ends with:

* "named": ARGS of that tool, the rest of the call, then the end (exactly one call);
* "required": with one tool as "named" (the primer names it); with several, the rest of the name
  (one of the tools), the call, then optionally more calls;
* "auto": free text with no ``<tool_call>`` in it, or text then one or more calls; with an
  `answer` schema (a response format), a JSON answer valid against it, or one or more calls.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

from aotx.tool_calls import CLOSE_TAG, OPEN_TAG

ANY_OBJECT = {"type": "object"}
NL = "\n"


def _lit(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _name(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def _args_schema(tool, options: dict) -> str:
    schema = tool.parameters if getattr(tool, "strict", False) and tool.parameters else ANY_OBJECT
    return json.dumps({**schema, "x-guidance": options}, ensure_ascii=False)


def _rules(tools: Sequence, options: dict) -> list[str]:
    """args_<i>: the arguments of tool i; tail: the end of a call after its arguments."""
    rules = [f"args_{i}: %json {_args_schema(t, options)}" for i, t in enumerate(tools)]
    rules.append(f"tail: {_lit('}' + NL + CLOSE_TAG)}")
    return rules


def _head(name: str) -> str:
    """A call body up to its arguments: what a named primer ends with."""
    return '{"name": ' + _name(name) + ', "arguments": '


def _body(i: int, tool) -> str:
    """One whole call body after OPEN_TAG + newline."""
    return f"{_lit(_head(tool.name))} args_{i} tail"


def tool_call_lark(tools: Sequence, mode: str, forced: str | None, primer: str, options: dict,
                   answer: dict | None = None) -> str:
    if not tools:
        raise ValueError("no tools to call")
    index = {t.name: i for i, t in enumerate(tools)}
    more = f"({_lit(NL + OPEN_TAG + NL)} call)*"
    calls = " | ".join(f"({_body(i, t)})" for i, t in enumerate(tools))
    rules = _rules(tools, options) + [f"call: {calls}"]
    if mode == "required" and len(tools) == 1:
        mode, forced = "named", tools[0].name
    if mode == "named":
        if forced not in index:
            raise ValueError(f"unknown tool {forced!r}")
        if primer != OPEN_TAG + NL + _head(forced):
            raise ValueError("the primer does not open a call of the named tool")
        start = f"start: args_{index[forced]} tail"
    elif mode == "required":
        if primer != OPEN_TAG + NL + '{"name": "':
            raise ValueError("the primer does not open a call")
        # the primer ends inside the name's string: the rest of one name, then that call
        opened = '{"name": "'
        rests = " | ".join(f"({_lit(_head(t.name)[len(opened):])} args_{i} tail)" for i, t in enumerate(tools))
        start = f"start: first {more}"
        rules.append(f"first: {rests}")
    elif mode == "auto":
        if primer:
            raise ValueError("auto tool choice has no primer")
        if answer is not None:      # an answer in the response format, or calls (no text before)
            start = f"start: answer | {_lit(OPEN_TAG + NL)} call {more}"
            rules.append(f"answer: %json {json.dumps({**answer, 'x-guidance': options}, ensure_ascii=False)}")
        else:
            start = f"start: TEXT | pre call {more}"
            rules.append(f"TEXT: /(?s:.*)/ & ~/(?s:.*{OPEN_TAG}.*)/")
            rules.append(f"pre[lazy]: /(?s:.*){OPEN_TAG}\\n/")
    else:
        raise ValueError(f"unknown tool-call mode {mode!r}")
    return "\n".join([start, *rules]) + "\n"
