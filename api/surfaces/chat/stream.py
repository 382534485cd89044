"""Chat Completions stream projector: Deltas -> chat.completion.chunk events. Pure."""
from __future__ import annotations

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolArgs, ToolStart
from api.ids import new_id
from api.logprobs import chat_logprobs
from api.sse import DONE, ServerSentEvent
from api.surfaces.openai_chunks import OpenAIChunkStream, usage_object

__all__ = ["ChatStreamProjector", "usage_object"]
_CONTENT_CLOSE = '},"logprobs":null,"finish_reason":null}]'


class ChatStreamProjector(OpenAIChunkStream):
    def __init__(self, *, id: str, created: int, model: str, fingerprint: str, n: int,
                 parse_tools: bool, include_usage: bool, logprobs: bool,
                 tool_primer: str = "") -> None:
        super().__init__(object="chat.completion.chunk", id=id, created=created, model=model,
                         fingerprint=fingerprint, include_usage=include_usage)
        self._decoders = [ChoiceDecoder(parse_tools, tool_primer, logprobs) for _ in range(n)]
        self._logprobs = logprobs

    def _choice(self, i: int, delta: dict, finish: str | None = None, lps=None) -> dict:
        return {"index": i, "delta": delta,
                "logprobs": chat_logprobs(lps) if self._logprobs and lps is not None else None,
                "finish_reason": finish}

    def _content(self, i: int, text: str):
        """A content chunk without logprobs: the choice from its template."""
        return self._text_chunk('[{"index":%d,"delta":{"content":' % i, text, _CONTENT_CLOSE)

    def plain_bytes(self, i: int, delta: Delta) -> bytes | None:
        """`feed`'s events' bytes for a plain token (ChoiceDecoder.plain_text), without building events;
        None (nothing done): `feed` this delta (api.runner._stream_events)."""
        text = self._decoders[i].plain_text(delta)
        if text is None:
            return None
        return self._text_bytes('[{"index":%d,"delta":{"content":' % i, text, _CONTENT_CLOSE) if text else b""

    def open(self) -> list[ServerSentEvent]:
        """One first chunk naming every choice (indices 0..n-1), role sent once each."""
        return [self._chunk([self._choice(i, {"role": "assistant", "content": ""})
                             for i in range(len(self._decoders))])]

    def feed(self, i: int, delta: Delta) -> list[ServerSentEvent]:
        decoder = self._decoders[i]
        text = decoder.plain_text(delta)
        if text is not None:                 # a plain token (no tools, no logprobs): its chunk from the template
            return [self._content(i, text)] if text else []
        events: list[ServerSentEvent] = []
        for out in decoder.feed(delta):
            if isinstance(out, TextOut):
                if out.text:
                    events.append(self._content(i, out.text) if not self._logprobs else
                                  self._chunk([self._choice(i, {"content": out.text}, lps=out.logprobs)]))
            elif isinstance(out, ToolStart):
                head = {"index": out.index, "id": new_id("call_"), "type": "function",
                        "function": {"name": out.name, "arguments": ""}}
                events.append(self._chunk([self._choice(i, {"tool_calls": [head]})]))
            elif isinstance(out, ToolArgs):
                body = {"index": out.index, "function": {"arguments": out.fragment}}
                events.append(self._chunk([self._choice(i, {"tool_calls": [body]})]))
            elif isinstance(out, FinishOut):
                events.append(self._chunk([self._choice(i, {}, out.reason)]))
                events += self._maybe_end()
            elif isinstance(out, ErrorOut):
                return events + self.fail(out.message)
        return events

    def _maybe_end(self) -> list[ServerSentEvent]:
        if not all(d.finished for d in self._decoders):
            return []
        self.done = True
        events = []
        if self._include_usage:
            prompt = max(d.prompt_tokens for d in self._decoders)
            completion = sum(d.completion_tokens for d in self._decoders)
            events.append(self._chunk([], usage_object(prompt, completion)))
        return events + [ServerSentEvent(DONE)]
