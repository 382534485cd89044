"""Responses stream projector: Deltas -> response.* events with contiguous sequence_number.

Pure. The buffered builder runs the same machine and returns its terminal
response, so both lanes produce the same object.
"""
from __future__ import annotations

import time

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolArgs, ToolEnd, ToolStart
from api.errors import engine_failure
from api.ids import new_id
from api.logprobs import chat_entry, responses_delta_entry
from api.sse import ServerSentEvent


def usage_object(input_tokens: int, output_tokens: int) -> dict:
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


class ResponsesStreamProjector:
    def __init__(self, *, id: str, created_at: int, model: str, echo: dict,
                 parse_tools: bool, logprobs: bool, tool_primer: str = "",
                 buffered: bool = False) -> None:
        self._base = {"id": id, "object": "response", "created_at": created_at, "model": model,
                      "previous_response_id": None, "text": {"format": {"type": "text"}},
                      "truncation": "disabled", "store": False, "background": False, **echo}
        self._decoder = ChoiceDecoder(parse_tools, tool_primer, logprobs, buffered=buffered)
        self._logprobs = logprobs
        self._seq = 0
        self._output: list[dict] = []
        self._open: dict | None = None   # the open message item
        self._call: dict | None = None   # the open function_call item
        self._text: list[str] = []
        self._lps: list = []
        self.done = False
        self.final: dict | None = None   # the terminal response object
        self.failure = None              # the ApiError of a failed generation (fail())

    @property
    def base(self) -> dict:
        """The fields every response object of this run carries besides its status and output."""
        return dict(self._base)

    def _event(self, kind: str, **payload) -> ServerSentEvent:
        data = {"type": kind, "sequence_number": self._seq, **payload}
        self._seq += 1
        return ServerSentEvent(data, event=kind)

    def response(self, status: str, *, usage: dict | None = None, error: dict | None = None,
                 incomplete: dict | None = None) -> dict:
        return {**self._base, "status": status, "error": error, "incomplete_details": incomplete,
                "completed_at": int(time.time()) if status == "completed" else None,
                "output": [dict(item) for item in self._output], "usage": usage}

    def open(self) -> list[ServerSentEvent]:
        snapshot = self.response("in_progress")
        return [self._event("response.created", response=snapshot),
                self._event("response.in_progress", response=snapshot)]

    def _part(self) -> dict:
        return {"type": "output_text", "text": "".join(self._text), "annotations": [],
                "logprobs": [chat_entry(lp) for lp in self._lps]}

    def _open_message(self) -> list[ServerSentEvent]:
        item = {"type": "message", "id": new_id("msg_"), "role": "assistant",
                "status": "in_progress", "content": []}
        self._output.append(item)
        self._open, self._text, self._lps = item, [], []
        ids = {"item_id": item["id"], "output_index": len(self._output) - 1}
        return [self._event("response.output_item.added", output_index=ids["output_index"],
                            item={**item, "content": []}),
                self._event("response.content_part.added", **ids, content_index=0,
                            part={"type": "output_text", "text": "", "annotations": [],
                                  "logprobs": []})]

    def _close_message(self) -> list[ServerSentEvent]:
        item = self._open
        if item is None:
            return []
        self._open = None
        part = self._part()
        item.update(status="completed", content=[part])
        ids = {"item_id": item["id"], "output_index": self._output.index(item)}
        return [self._event("response.output_text.done", **ids, content_index=0,
                            text=part["text"], logprobs=part["logprobs"]),
                self._event("response.content_part.done", **ids, content_index=0, part=part),
                self._event("response.output_item.done", output_index=ids["output_index"],
                            item=dict(item))]

    def _text_delta(self, out: TextOut) -> list[ServerSentEvent]:
        events = [] if self._open is not None else self._open_message()
        self._text.append(out.text)
        lps = list(out.logprobs) if self._logprobs else []
        self._lps += lps
        events.append(self._event("response.output_text.delta", item_id=self._open["id"],
                                  output_index=len(self._output) - 1, content_index=0,
                                  delta=out.text,
                                  logprobs=[responses_delta_entry(lp) for lp in lps]))
        return events

    def _call_start(self, out: ToolStart) -> list[ServerSentEvent]:
        events = self._close_message()
        item = {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
                "name": out.name, "arguments": "", "status": "in_progress"}
        self._output.append(item)
        self._call = item
        events.append(self._event("response.output_item.added",
                                  output_index=len(self._output) - 1, item=dict(item)))
        return events

    def _call_ids(self) -> dict:
        return {"item_id": self._call["id"], "output_index": self._output.index(self._call)}

    def _call_args(self, out: ToolArgs) -> list[ServerSentEvent]:
        self._call["arguments"] += out.fragment
        return [self._event("response.function_call_arguments.delta", **self._call_ids(),
                            delta=out.fragment)]

    def _call_end(self, out: ToolEnd) -> list[ServerSentEvent]:
        item, ids = self._call, self._call_ids()
        self._call = None
        item.update(status="incomplete" if out.broken else "completed")
        return [self._event("response.function_call_arguments.done", **ids,
                            arguments=item["arguments"], name=item["name"]),
                self._event("response.output_item.done", output_index=ids["output_index"],
                            item=dict(item))]

    def feed(self, _choice: int, delta: Delta) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        for out in self._decoder.feed(delta):
            if isinstance(out, TextOut):
                if out.text:
                    events += self._text_delta(out)
            elif isinstance(out, ToolStart):
                events += self._call_start(out)
            elif isinstance(out, ToolArgs) and out.fragment:
                events += self._call_args(out)
            elif isinstance(out, ToolEnd):
                events += self._call_end(out)
            elif isinstance(out, FinishOut):
                events += self._close_message()
                usage = usage_object(out.prompt_tokens, out.completion_tokens)
                if out.reason == "length":
                    self.final = self.response("incomplete", usage=usage,
                                               incomplete={"reason": "max_output_tokens"})
                    events.append(self._event("response.incomplete", response=self.final))
                else:
                    self.final = self.response("completed", usage=usage)
                    events.append(self._event("response.completed", response=self.final))
                self.done = True
            elif isinstance(out, ErrorOut):
                return events + self.fail(out.message)
        return events

    def fail(self, message: str) -> list[ServerSentEvent]:
        """`error` (top-level code/message/param) then `response.failed`, numbering continued."""
        self.done = True
        self.failure = engine_failure(message)
        text = self.failure.message
        d = self._decoder
        self.final = self.response("failed", error={"code": "server_error", "message": text},
                                   usage=usage_object(d.prompt_tokens, d.completion_tokens))
        return [self._event("error", code="server_error", message=text, param=None),
                self._event("response.failed", response=self.final)]
