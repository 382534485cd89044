"""A small answer in one write, and a small body read without a timer, where the server is ours (uvicorn's
httptools protocol, api.server); the two ASGI messages everywhere else.

`respond(send, status, headers, body)` writes what uvicorn's `send` writes for an `http.response.start`
followed by a final `http.response.body` (the status line, its default headers — the date —, `headers`,
a `connection: close` where the connection will not be kept, the blank line, the body) as one transport
write instead of two, with the same checks (header names and values), the same flow control (waits
while writing is paused; nothing where the client is gone) and the same ending (the response complete,
the connection closed where not kept alive, the next pipelined request started). One write is one
`send()` on the socket instead of two (docs/PERFORMANCE.md, "Issue 10, session 14"). Where `send` is not
such a cycle's (a test client, another server, a middleware in between), where the response has begun,
where uvicorn would write an access log line (api.server turns it off), for a HEAD request, or where
`headers` name a connection or transfer encoding, or a content length that is not `body`'s, it sends
the two messages.

`body_now(receive)`: the request's whole body where uvicorn has read all of it and nothing has taken it
yet (the message `receive` would return at once, taken as `receive` takes it); None otherwise (then read
it through `receive`).
"""
from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE, RequestResponseCycle

_OTHER = frozenset({b"connection", b"transfer-encoding", b"content-length"})


def _cycle(bound: Any) -> RequestResponseCycle | None:
    """The uvicorn request/response cycle `bound` (its `send` or `receive`) belongs to; None for anything else."""
    owner = getattr(bound, "__self__", None)
    return owner if type(owner) is RequestResponseCycle else None


async def respond(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """`http.response.start` (status, headers) and the final `http.response.body` (body), in one write where
    `send` is uvicorn's (see the module)."""
    cycle = _cycle(send)
    if (cycle is None or cycle.response_started or cycle.access_log or cycle.scope["method"] == "HEAD"
            or not _plain(headers, body)):
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    if cycle.flow.write_paused and not cycle.disconnected:
        await cycle.flow.drain()
    if cycle.disconnected:
        return
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    every = cycle.default_headers + headers
    if HEADER_RE.search(b"".join(name for name, _ in every)):
        raise RuntimeError("Invalid HTTP header name.")
    if HEADER_VALUE_RE.search(b"".join(value for _, value in every)):
        raise RuntimeError("Invalid HTTP header value.")
    content = [STATUS_LINE[status]]
    for name, value in every:
        content += (name.lower(), b": ", value, b"\r\n")
    if not cycle.keep_alive:
        content.append(b"connection: close\r\n")
    content += (b"\r\n", body)
    cycle.chunked_encoding, cycle.expected_content_length = False, 0
    cycle.transport.write(b"".join(content))
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()


def _plain(headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
    """One content-length, `body`'s, and no connection or transfer-encoding header (what `respond` writes
    itself)."""
    length = None
    for name, value in headers:
        low = name.lower()
        if low == b"content-length" and length is None:
            length = value
        elif low in _OTHER:
            return False
    return length == str(len(body)).encode()


def body_now(receive: Any) -> bytes | None:
    """The whole request body where it has all arrived and is unread (what `receive()` would return at once,
    taken the way it takes it); None where `receive` is not uvicorn's or would wait."""
    cycle = _cycle(receive)
    if (cycle is None or cycle.more_body or cycle.disconnected or cycle.response_complete
            or cycle.waiting_for_100_continue or not cycle.message_event.is_set()):
        return None
    cycle.flow.resume_reading()
    cycle.message_event.clear()
    data = bytes(cycle.body)
    cycle.body = bytearray()
    return data
