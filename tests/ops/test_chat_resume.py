"""`aotx chat`'s streams survive a dropped connection: the reconnection sends Last-Event-ID with the id of
the last event printed, and nothing is handled twice. The server here is a few lines of asyncio speaking
HTTP/1.1, because the real one cannot be made to cut a connection on cue; the client is the chat's own
stream reader over httpx."""
from __future__ import annotations

import asyncio
import json

import httpx

from ops.chat.shared import SharedChat


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(name: str, eid: str, doc: dict) -> bytes:
    return f"event: {name}\nid: {eid}\ndata: {json.dumps(doc)}\n\n".encode()


async def test_a_dropped_stream_resumes_from_the_last_event_id(capsys):
    heads: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append((await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower())
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        if len(heads) == 1:   # one event, then the connection is cut mid-stream (no last chunk)
            writer.write(_chunk(_event("input", "/s@1", {"n": 1}) + b": keep-alive\n\n"))
        else:
            writer.write(_chunk(_event("input", "/s@2", {"n": 2})) + _chunk(_event("end", "/s@3", {})) + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    seen: list[tuple[str, str | None]] = []

    async def on(ev) -> bool:
        seen.append((ev.event, ev.id))
        return ev.event == "end"

    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await asyncio.wait_for(SharedChat(client, "m", None)._stream("/s", None, on), timeout=60)
    finally:
        server.close()
        await server.wait_closed()
    assert seen == [("input", "/s@1"), ("input", "/s@2"), ("end", "/s@3")]
    assert len(heads) == 2 and "last-event-id" not in heads[0]
    assert "last-event-id: /s@1\r\n" in heads[1]
    assert "dropped" in capsys.readouterr().out
