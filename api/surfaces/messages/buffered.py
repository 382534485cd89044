"""Anthropic Messages buffered builder: Deltas -> a `message` object."""
from __future__ import annotations

import json
import logging
from typing import Sequence

from aotx import strict_json
from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolEnd
from api.errors import engine_failure
from api.ids import new_id
from api.surfaces.messages.stream import message_object, stop_reason

log = logging.getLogger("aotx.tool_calls")


def tool_input(arguments: str) -> dict:
    """A tool_use block's `input`: its arguments, read as strict JSON. A buffered answer has
    only complete calls (a broken one comes back as text, api.decode), whose arguments the
    reader (aotx.json_prefix) kept within strict_json's bounds; should any still fail, the
    input is {} and a warning is logged, never a NaN on the wire or a 500."""
    if not arguments:
        return {}
    try:
        value = strict_json.loads(arguments)
    except (json.JSONDecodeError, strict_json.JsonInputError) as exc:
        log.warning("tool arguments are not strict JSON; input {}", extra={"fields": {
            "error": str(exc), "arguments_chars": len(arguments)}})
        return {}
    return value if isinstance(value, dict) else {}


def build_message(deltas: Sequence[Delta], *, id: str, model: str, input_tokens: int,
                  parse_tools: bool, tool_primer: str = "") -> dict:
    decoder = ChoiceDecoder(parse_tools, tool_primer, buffered=True)
    content: list[dict] = []
    finish = None
    for delta in deltas:
        for out in decoder.feed(delta):
            if isinstance(out, TextOut) and out.text:
                if content and content[-1]["type"] == "text":
                    content[-1]["text"] += out.text
                else:
                    content.append({"type": "text", "text": out.text, "citations": None})
            elif isinstance(out, ToolEnd):
                content.append({"type": "tool_use", "id": new_id("toolu_"), "name": out.name,
                                "input": tool_input(out.arguments)})
            elif isinstance(out, FinishOut):
                finish = out
            elif isinstance(out, ErrorOut):
                raise engine_failure(out.message)
    if finish is None:
        raise engine_failure("generation ended without a finish")
    return message_object(id=id, model=model, content=content, stop=stop_reason(finish),
                          stop_sequence=finish.stop_sequence,
                          input_tokens=finish.prompt_tokens or input_tokens,
                          output_tokens=finish.completion_tokens)
