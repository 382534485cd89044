"""Server-sent events: framing and the streaming response."""
from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator

from quart import Response

from aotx import strict_json

DONE = "[DONE]"
KEEPALIVE = b": keep-alive\n\n"   # a comment line: keeps an idle stream's connection open


@dataclass(frozen=True)
class ServerSentEvent:
    data: object            # a JSON-able object, or a raw string such as "[DONE]"
    event: str | None = None
    id: str | None = None

    def encode(self) -> bytes:
        lines = []
        if self.event is not None:
            lines.append(f"event: {self.event}")
        if self.id is not None:
            lines.append(f"id: {self.id}")
        payload = self.data if isinstance(self.data, str) else strict_json.dumps(
            self.data, separators=(",", ":"))
        lines.append(f"data: {payload}")
        return ("\n".join(lines) + "\n\n").encode("utf-8")


class EncodedEvent:
    """An event already in its wire form (a template's output): `encode()` gives the bytes."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def encode(self) -> bytes:
        return self.raw


def sse_response(events: AsyncIterator[bytes]) -> Response:
    response = Response(events, status=200, content_type="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.timeout = None
    return response
