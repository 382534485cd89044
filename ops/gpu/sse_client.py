"""A lean HTTP/1.1 client for the serving benches' streaming requests (a benchmark tool, not a test):
one keep-alive connection per stream, the SSE `data:` fields handed over as they arrive, stamped with
the read that brought them.

Why not httpx: its connection pool costs O(open connections) of CPU per request (httpcore's
`_assign_requests_to_connections` walks every pooled connection, polling each idle socket, on every
request and every response end: encode/httpx#3215), so one client process with 64 concurrent streams
spent 15 ms of CPU a request and one with 128, 32 ms (2-core sandbox; docs/PERFORMANCE.md, "Issue 12,
session 13"): the client sent its requests over a second and the server's batch never filled, so
the bench measured its own client. Here a request costs the same whatever the number of streams:
one write, then reads of a chunked (or sized) body on its own connection.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit


class HTTPStatusError(RuntimeError):
    """The server answered something other than 200: its status and body."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:500].decode('utf-8', 'replace')}")
        self.status, self.body = status, body


class StreamConn:
    """One keep-alive HTTP/1.1 connection to `base` (http://host:port) that POSTs JSON and reads SSE
    answers; reopened when the server closed it. Not for concurrent requests: one stream at a time."""

    def __init__(self, base: str) -> None:
        url = urlsplit(base)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self._head = f"Host: {url.netloc}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = self._reader = None

    async def sse(self, path: str, body: bytes) -> AsyncIterator[tuple[float, bytes]]:
        """POST `body` to `path`; yield (arrival time, data) for each SSE event's `data` field, the
        time being time.perf_counter() when the read that completed the event returned."""
        await self.open()
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        writer.write(f"POST {path} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        status, headers = _head(await reader.readuntil(b"\r\n\r\n"))
        chunked = "chunked" in headers.get("transfer-encoding", "")
        keep = headers.get("connection", "").lower() != "close"
        if status != 200:
            data = b"".join([piece async for piece in _body(reader, headers, chunked)])
            self.close()
            raise HTTPStatusError(status, data)
        pending = b""
        try:
            async for piece in _body(reader, headers, chunked):
                t = time.perf_counter()
                pending += piece
                if b"\n\n" not in pending:
                    continue
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    for line in event.split(b"\n"):
                        if line.startswith(b"data:"):
                            yield t, line[6:] if line[5:6] == b" " else line[5:]
        except BaseException:
            self.close()   # a stream left half read cannot carry the next request
            raise
        if not keep:
            self.close()


def _head(raw: bytes) -> tuple[int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def _body(reader: asyncio.StreamReader, headers: dict[str, str], chunked: bool) -> AsyncIterator[bytes]:
    """The response body's pieces as they come: each chunk of a chunked body, or a sized body's reads."""
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":   # trailers, then the empty line
                    pass
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    left = int(headers.get("content-length", "0"))
    while left > 0:
        data = await reader.read(min(left, 1 << 16))
        if not data:
            raise asyncio.IncompleteReadError(b"", left)
        left -= len(data)
        yield data
