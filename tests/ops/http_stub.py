"""What the tests' stub HTTP/1.1 servers share: read one request's body off a keep-alive connection."""
from __future__ import annotations

import asyncio


async def read_request_body(reader: asyncio.StreamReader) -> bytes | None:
    """The next request's body (its head read and dropped; content-length framing), or None once the client has
    closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return await reader.readexactly(length)
