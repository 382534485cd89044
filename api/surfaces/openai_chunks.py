"""What the Chat and legacy Completions streams share: the chunk head, usage, the error.

Every chunk repeats one `id`/`object`/`created`/`model`/`system_fingerprint`
head; with `stream_options.include_usage` every chunk carries `usage` (null
until the one final `choices: []` chunk); a failure after the stream began is a
data object with a top-level `error` (WIRE-REFERENCE 1c, 1d, 2c).
"""
from __future__ import annotations

from json.encoder import encode_basestring

from aotx import strict_json
from api.errors import engine_failure, openai_body
from api.sse import EncodedEvent, ServerSentEvent

_COMPACT = (",", ":")


def usage_object(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}}


class OpenAIChunkStream:
    def __init__(self, *, object: str, id: str, created: int, model: str, fingerprint: str,
                 include_usage: bool) -> None:
        self._head = {"id": id, "object": object, "created": created, "model": model,
                      "system_fingerprint": fingerprint}
        self._include_usage = include_usage
        self.done = False
        # the wire form of {**head, "choices": C, ("usage": U)}, the head encoded once: the bytes are those
        # of encoding the whole object (tests/api/test_chunk_template.py)
        whole = strict_json.dumps({**self._head, "choices": None}, separators=_COMPACT)
        self._open = "data: " + whole[:-len("null}")]          # 'data: {"id":...,"choices":'
        self._end = ',"usage":null}\n\n' if include_usage else "}\n\n"

    def _chunk(self, choices: list[dict], usage: dict | None = None) -> EncodedEvent:
        body = strict_json.dumps(choices, separators=_COMPACT)
        end = self._end if usage is None else (
            ',"usage":' + strict_json.dumps(usage, separators=_COMPACT) + "}\n\n" if self._include_usage
            else "}\n\n")
        return EncodedEvent((self._open + body + end).encode("utf-8"))

    def _text_chunk(self, choice_open: str, text: str, choice_close: str) -> EncodedEvent:
        """One choice whose only varying field is a string: `choice_open` + the JSON string + `choice_close`
        (each surface's plain token chunk), no dict built."""
        return EncodedEvent(self._text_bytes(choice_open, text, choice_close))

    def _text_bytes(self, choice_open: str, text: str, choice_close: str) -> bytes:
        return (self._open + choice_open + encode_basestring(text) + choice_close + self._end).encode("utf-8")

    def fail(self, message: str) -> list[ServerSentEvent]:
        """The native mid-stream error: a data object with a top-level `error`; then close."""
        self.done = True
        return [ServerSentEvent(openai_body(engine_failure(message)))]
