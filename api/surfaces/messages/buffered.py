"""Anthropic Messages buffered builder: Deltas -> a `message` object."""
from __future__ import annotations

from typing import Sequence

from jiter import from_json

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolEnd
from api.errors import engine_failure
from api.ids import new_id
from api.surfaces.messages.stream import message_object, stop_reason


def tool_input(arguments: str) -> dict:
    """A tool_use block's `input`: its arguments read as the SDK reads the streamed
    `input_json_delta`s (jiter, partial mode), so a call cut by the budget comes back
    with what its arguments had so far, and buffered and streamed blocks agree."""
    if not arguments:
        return {}
    try:
        value = from_json(arguments.encode(), partial_mode=True)
    except ValueError:   # not JSON text (the model's own): no input can be read from it
        return {}
    return value if isinstance(value, dict) else {}


def build_message(deltas: Sequence[Delta], *, id: str, model: str, input_tokens: int,
                  parse_tools: bool, tool_primer: str = "") -> dict:
    decoder = ChoiceDecoder(parse_tools, tool_primer)
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
