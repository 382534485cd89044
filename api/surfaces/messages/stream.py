"""Anthropic Messages stream projector: Deltas -> message_* / content_block_* events. Pure."""
from __future__ import annotations

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolArgs, ToolEnd, ToolStart
from api.errors import anthropic_body, engine_failure
from api.ids import new_id
from api.sse import ServerSentEvent


def stop_reason(finish: FinishOut) -> str:
    if finish.reason == "tool_calls":
        return "tool_use"
    if finish.reason == "length":
        return "max_tokens"
    return "stop_sequence" if finish.stop_sequence else "end_turn"


def usage(input_tokens: int, output_tokens: int) -> dict:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "service_tier": "standard"}


def message_object(*, id: str, model: str, content: list, stop: str | None,
                   stop_sequence: str | None, input_tokens: int, output_tokens: int) -> dict:
    return {"id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": stop_sequence,
            "usage": usage(input_tokens, output_tokens)}


def _event(data: dict) -> ServerSentEvent:
    return ServerSentEvent(data, event=data["type"])


class MessagesStreamProjector:
    def __init__(self, *, id: str, model: str, input_tokens: int, parse_tools: bool,
                 tool_primer: str = "") -> None:
        self._id, self._model, self._input = id, model, input_tokens
        self._decoder = ChoiceDecoder(parse_tools, tool_primer)
        self._index = -1          # index of the last block started
        self._open: str | None = None  # type of the open block
        self._pinged = False
        self.done = False

    def open(self) -> list[ServerSentEvent]:
        return [_event({"type": "message_start", "message": message_object(
            id=self._id, model=self._model, content=[], stop=None, stop_sequence=None,
            input_tokens=self._input, output_tokens=0)})]

    def _start(self, block: dict) -> list[ServerSentEvent]:
        events = self._close()
        self._index += 1
        self._open = block["type"]
        events.append(_event({"type": "content_block_start", "index": self._index,
                              "content_block": block}))
        if not self._pinged:
            self._pinged = True
            events.append(_event({"type": "ping"}))
        return events

    def _close(self) -> list[ServerSentEvent]:
        if self._open is None:
            return []
        self._open = None
        return [_event({"type": "content_block_stop", "index": self._index})]

    def _delta(self, delta: dict) -> ServerSentEvent:
        return _event({"type": "content_block_delta", "index": self._index, "delta": delta})

    def feed(self, _choice: int, delta: Delta) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        for out in self._decoder.feed(delta):
            if isinstance(out, TextOut) and out.text:
                if self._open != "text":
                    events += self._start({"type": "text", "text": ""})
                events.append(self._delta({"type": "text_delta", "text": out.text}))
            elif isinstance(out, ToolStart):
                events += self._start({"type": "tool_use", "id": new_id("toolu_"),
                                       "name": out.name, "input": {}})
            elif isinstance(out, ToolArgs) and out.fragment:
                events.append(self._delta({"type": "input_json_delta",
                                           "partial_json": out.fragment}))
            elif isinstance(out, ToolEnd):
                events += self._close()
            elif isinstance(out, FinishOut):
                events += self._close()
                events.append(_event({"type": "message_delta",
                                      "delta": {"stop_reason": stop_reason(out),
                                                "stop_sequence": out.stop_sequence},
                                      "usage": {"input_tokens": out.prompt_tokens or self._input,
                                                "output_tokens": out.completion_tokens}}))
                events.append(_event({"type": "message_stop"}))
                self.done = True
            elif isinstance(out, ErrorOut):
                return events + self.fail(out.message)
        return events

    def fail(self, message: str) -> list[ServerSentEvent]:
        """`event: error` with the Anthropic envelope; the stream then closes."""
        self.done = True
        return [_event(anthropic_body(engine_failure(message)))]
