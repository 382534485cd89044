"""What the Chat and legacy Completions streams share: the chunk head, usage, the error.

Every chunk repeats one `id`/`object`/`created`/`model`/`system_fingerprint`
head; with `stream_options.include_usage` every chunk carries `usage` (null
until the one final `choices: []` chunk); a failure after the stream began is a
data object with a top-level `error` (WIRE-REFERENCE 1c, 1d, 2c).
"""
from __future__ import annotations

from api.errors import engine_failure, openai_body
from api.sse import ServerSentEvent


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

    def _chunk(self, choices: list[dict], usage: dict | None = None) -> ServerSentEvent:
        data = {**self._head, "choices": choices}
        if self._include_usage:
            data["usage"] = usage
        return ServerSentEvent(data)

    def fail(self, message: str) -> list[ServerSentEvent]:
        """The native mid-stream error: a data object with a top-level `error`; then close."""
        self.done = True
        return [ServerSentEvent(openai_body(engine_failure(message)))]
