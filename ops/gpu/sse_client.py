"""A lean HTTP/1.1 client for the serving benches' streaming requests (a benchmark tool, not a test):
one keep-alive connection per stream; an answer's SSE `data` fields are handed to a callback as the bytes
arrive, stamped with the time of the read that brought them.

Why not httpx: its connection pool costs O(open connections) of CPU per request (httpcore's
`_assign_requests_to_connections` walks every pooled connection, polling each idle socket, on every
request and every response end: encode/httpx#3215), so one client process with 64 concurrent streams
spent 13.6 ms of CPU a request and one with 128, 27.7 ms (2-core sandbox; docs/PERFORMANCE.md, "Issue 12,
session 13"): the client sent its requests over a second and the server's batch never filled, so the
bench measured its own client. Here a request costs the same whatever the number of streams: one write,
then the body parsed where it is received (`asyncio.Protocol.data_received`: no coroutine resumed per
chunk), chunked or sized.
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable
from urllib.parse import urlsplit

OnData = Callable[[float, bytes], None]


class HTTPStatusError(RuntimeError):
    """The server answered something other than 200: its status and body."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:500].decode('utf-8', 'replace')}")
        self.status, self.body = status, body


class _Answer(asyncio.Protocol):
    """One connection's reader: the answer to the request in flight, parsed as its bytes come."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._done: asyncio.Future | None = None
        self._on_data: OnData | None = None
        self._buf = b""
        self._head = True            # before the blank line that ends the response head
        self._chunked = False
        self._left = 0               # a sized body's bytes still to come
        self._status = 0
        self._keep = True
        self._events = b""           # SSE bytes not yet ended by a blank line
        self._error = b""            # a refusal's body
        self._raised: Exception | None = None   # what the callback raised

    def begin(self, on_data: OnData) -> asyncio.Future:
        self._done = asyncio.get_running_loop().create_future()
        self._on_data, self._buf, self._head, self._events, self._error = on_data, b"", True, b"", b""
        return self._done

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc or ConnectionError("the server closed the connection mid-answer"))

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            return
        t = time.perf_counter()
        buf = self._buf + data
        try:
            if self._head:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    self._buf = buf
                    return
                self._read_head(buf[:end].decode("latin-1"))
                buf = buf[end + 4:]
            self._buf = self._read_body(buf, t)
        except Exception as exc:   # the caller's callback raised, or not the HTTP this client speaks
            self._done.set_exception(exc if exc is self._raised else ConnectionError(f"malformed answer: {exc!r}"))
            self.transport.close()

    def _read_head(self, head: str) -> None:
        lines = head.split("\r\n")
        self._status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        self._chunked = "chunked" in headers.get("transfer-encoding", "")
        self._left = int(headers.get("content-length", "0"))
        self._keep = headers.get("connection", "").lower() != "close"
        self._head = False
        if not self._chunked and self._left == 0:
            self._end()

    def _read_body(self, buf: bytes, t: float) -> bytes:
        """Take what `buf` holds of the body; returns the bytes to keep for the next read."""
        if not self._chunked:
            piece, buf = buf[:self._left], buf[self._left:]
            self._left -= len(piece)
            self._piece(piece, t)
            if self._left == 0:
                self._end()
            return buf
        at = 0
        while True:
            eol = buf.find(b"\r\n", at)
            if eol < 0:
                return buf[at:]
            size = int(buf[at:eol].split(b";", 1)[0], 16)
            if size == 0:    # the last chunk: no trailers expected, then the blank line
                if len(buf) < eol + 4:
                    return buf[at:]
                self._end()
                return buf[eol + 4:]
            if len(buf) < eol + 2 + size + 2:
                return buf[at:]
            self._piece(buf[eol + 2:eol + 2 + size], t)
            at = eol + 2 + size + 2

    def _piece(self, piece: bytes, t: float) -> None:
        if self._status != 200:
            self._error += piece
            return
        events = self._events + piece
        if b"\n\n" not in events:
            self._events = events
            return
        *done, self._events = events.split(b"\n\n")
        on_data = self._on_data
        for event in done:
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    try:
                        on_data(t, line[6:] if line[5:6] == b" " else line[5:])
                    except Exception as exc:
                        self._raised = exc
                        raise

    def _end(self) -> None:
        if self._status != 200:
            self._done.set_exception(HTTPStatusError(self._status, self._error))
        else:
            self._done.set_result(None)
        if not self._keep or self._status != 200:
            self.closed = True   # now: the next request opens a new connection, not this closing one
            self.transport.close()


class StreamConn:
    """One keep-alive HTTP/1.1 connection to `base` (http://host:port) that POSTs JSON and reads SSE
    answers; reopened when the server closed it. One request at a time."""

    def __init__(self, base: str) -> None:
        url = urlsplit(base)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self._head = f"Host: {url.netloc}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
        self._proto: _Answer | None = None

    async def open(self) -> None:
        if self._proto is None or self._proto.closed or self._proto.transport.is_closing():
            _, self._proto = await asyncio.get_running_loop().create_connection(_Answer, self.host, self.port)

    def close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None

    async def stream(self, path: str, body: bytes, on_data: OnData) -> None:
        """POST `body` to `path`; `on_data(t, data)` for each SSE event's `data` field as it arrives (`t`:
        time.perf_counter() when the read that completed the event returned); returns at the answer's
        end. A non-200 answer raises HTTPStatusError with its body."""
        await self.open()
        proto = self._proto
        assert proto is not None and proto.transport is not None
        done = proto.begin(on_data)
        proto.transport.write(f"POST {path} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n".encode()
                              + body)
        try:
            await done
        except BaseException:
            self.close()   # an answer left half read cannot carry the next request
            raise
