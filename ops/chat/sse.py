"""Server-sent events off an httpx streaming response (the WHATWG parsing rules we need: `event`,
`data` lines joined by newlines, `id`, comments ignored, an event ends at a blank line)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx


@dataclass(frozen=True)
class Event:
    event: str
    data: str
    id: str | None

    def json(self) -> Any:
        return json.loads(self.data)


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    name, data, eid = "message", [], None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield Event(name, "\n".join(data), eid)
            name, data, eid = "message", [], None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            eid = value
    if data:
        yield Event(name, "\n".join(data), eid)
