"""Anthropic Messages buffered builder: Deltas -> a `message` object."""
from __future__ import annotations

import json
from typing import Sequence

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolOut
from api.errors import engine_failure
from api.ids import new_id
from api.surfaces.messages.stream import message_object, stop_reason


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
            elif isinstance(out, ToolOut):
                content.append({"type": "tool_use", "id": new_id("toolu_"), "name": out.name,
                                "input": json.loads(out.arguments)})
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
