"""api.http_exchange on the real server (api.server: uvicorn + httptools): `respond` writes, in one write, the
bytes uvicorn writes for the two ASGI messages (keep-alive, HTTP/1.0, a client's Connection: close,
pipelined requests, HEAD), and `body_now` takes a body that has arrived whole, never a part of one."""
from __future__ import annotations

import asyncio
import contextlib
import re

import pytest

from api.http_exchange import body_now, respond
from api.server import serve_app

EXTRA = {201: [], 429: [(b"Retry-After", b"1")], 401: [(b"WWW-Authenticate", b"Bearer")]}


class App:
    """/one/<status> answers through `respond`, /two/<status> through the two messages, each
    `got:<body>`; `whole` records what body_now gave; /late/… tells `started` before it reads."""

    def __init__(self) -> None:
        self.whole: list[bytes | None] = []
        self.started = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        _, way, code = scope["path"].split("/")
        data = body_now(receive)
        self.whole.append(data)
        if way == "late":
            self.started.set()
        if data is None:
            data, more = b"", True
            while more:
                message = await receive()
                data += message.get("body", b"")
                more = message.get("more_body", False)
        status = int(code)
        body = b"got:" + data
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   *EXTRA.get(status, []), (b"cache-control", b"no-store"), (b"x-request-id", b"rid")]
        if way == "one":
            await respond(send, status, headers, body)
        else:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})


@contextlib.asynccontextmanager
async def serving():
    app, stop, ready = App(), asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop, on_ready=lambda h, p: ready.set_result(p)))
    try:
        yield app, await asyncio.wait_for(ready, 30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def _request(method: str, path: str, body: bytes = b"", version: str = "1.1", extra: str = "") -> bytes:
    return (f"{method} {path} HTTP/{version}\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


async def _answer(reader: asyncio.StreamReader, head_only: bool = False) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(re.search(rb"\r\ncontent-length: (\d+)\r\n", head).group(1))
    raw = head + (b"" if head_only else await reader.readexactly(length))
    return re.sub(rb"\r\ndate: [^\r]*\r\n", b"\r\ndate: D\r\n", raw)


async def _exchange(port: int, *requests: bytes, head_only: bool = False, closes: bool = False) -> list[bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(requests))   # all at once: pipelined where there are several
    out = [await _answer(reader, head_only) for _ in requests]
    if closes:
        assert await reader.read() == b""   # the server closed the connection
    writer.close()
    return out


@pytest.mark.parametrize("status", [201, 429, 401])
async def test_one_write_is_the_bytes_of_the_two_messages(status):
    async with serving() as (app, port):
        got = {}
        for way in ("one", "two"):
            got[way] = await _exchange(port, _request("POST", f"/{way}/{status}", b'{"a":1}'),
                                       _request("POST", f"/{way}/{status}", b"x"))
        one, two = got["one"], got["two"]
        assert one == two
        assert one[0].startswith(f"HTTP/1.1 {status} ".encode()) and one[0].endswith(b'got:{"a":1}')
        assert b"connection: close" not in one[0]
        assert app.whole == [b'{"a":1}', b"x"] * 2   # every body was there whole


async def test_a_connection_not_kept_gets_connection_close_and_is_closed():
    async with serving() as (_, port):
        for version, extra in (("1.0", ""), ("1.1", "Connection: close\r\n")):
            one = await _exchange(port, _request("POST", "/one/201", b"b", version, extra), closes=True)
            two = await _exchange(port, _request("POST", "/two/201", b"b", version, extra), closes=True)
            assert one == two and b"\r\nconnection: close\r\n" in one[0]


async def test_head_is_answered_as_uvicorn_answers_it():
    async with serving() as (_, port):
        one = await _exchange(port, _request("HEAD", "/one/201"), head_only=True)
        two = await _exchange(port, _request("HEAD", "/two/201"), head_only=True)
        assert one == two


async def test_a_body_not_all_there_is_read_through_receive():
    async with serving() as (app, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /late/201 HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc")
        await asyncio.wait_for(app.started.wait(), 30)   # the app has looked: only half the body was there
        writer.write(b"def")
        assert (await _answer(reader)).endswith(b"got:abcdef")
        assert app.whole == [None]
        writer.close()


async def test_expect_100_continue_is_left_to_receive():
    async with serving() as (app, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /one/201 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"ok")
        assert (await _answer(reader)).endswith(b"got:ok")
        assert app.whole == [None]
        writer.close()
