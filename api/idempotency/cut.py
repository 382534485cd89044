"""The end of a streamed repeat whose first attempt ended INTERRUPTED while the repeat followed it.

The repeat's status line (200) and the saved events went out already, so the 409 a buffered repeat gets
(`idempotency_key_interrupted`, naming the header: api.idempotency.replay.interrupted) travels as the
surface's own mid-stream error event, and the stream closes — never a short stream that looks whole:

* `chat.completions`, `completions`: a data object with a top-level `error` (OpenAI's envelope);
* `messages`: `event: error` with Anthropic's envelope;
* `responses`: `event: error` with top-level `code`, `message`, `param`, numbered after the saved events.
"""
from __future__ import annotations

from api.errors import ApiError, anthropic_body, openai_body
from api.idempotency.header import HEADER
from api.sse import ServerSentEvent


def interrupted() -> ApiError:
    return ApiError(409, f"The first request with this {HEADER} was interrupted before its answer was complete "
                         "(the server restarted, or the answer could not be saved); it is not run again. "
                         f"Send the request with a new {HEADER} to run it.", param=HEADER,
                    code="idempotency_key_interrupted")


def cut_event(surface: str, err: ApiError, events_sent: int) -> bytes:
    """The native mid-stream error event of `surface` for `err`; `events_sent`: the events before it."""
    if surface == "messages":
        body = anthropic_body(err)
        body.pop("request_id", None)   # a mid-stream error event carries none, as Anthropic's
        return ServerSentEvent(body, event="error").encode()
    if surface == "responses":
        return ServerSentEvent({"type": "error", "sequence_number": events_sent, "code": err.code,
                                "message": err.message, "param": err.param}, event="error").encode()
    return ServerSentEvent(openai_body(err)).encode()


def count_events(chunk: bytes) -> int:
    """SSE events in `chunk` (whole events, each ended by a blank line)."""
    return chunk.count(b"\n\n")
