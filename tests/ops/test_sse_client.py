"""ops.gpu.sse_client.StreamConn, the serving benches' client: SSE data fields from a chunked or sized body,
events split across chunks or several in one, keep-alive reuse, a closed connection reopened, a non-200
answer raised with its body."""
from __future__ import annotations

import asyncio

import pytest

from ops.gpu.sse_client import HTTPStatusError, StreamConn
from tests.ops.http_stub import read_request_body


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


class _Server:
    """Answers the n-th request on a connection with answers[n] (raw bytes after the request), recording
    each request's body and the connection it came on."""

    def __init__(self, answers: list[bytes], close_after: bool = False) -> None:
        self.answers, self.close_after = answers, close_after
        self.seen: list[tuple[int, bytes]] = []
        self.connections = 0

    async def start(self) -> str:
        self._srv = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._srv.sockets[0].getsockname()[1]}"

    async def _conn(self, reader, writer) -> None:
        cid = self.connections
        self.connections += 1
        while (body := await read_request_body(reader)) is not None:
            self.seen.append((cid, body))
            writer.write(self.answers[len(self.seen) - 1])
            await writer.drain()
            if self.close_after:
                break
        writer.close()

    def close(self) -> None:
        self._srv.close()


async def _read(conn: StreamConn, body: bytes = b"{}") -> list[bytes]:
    got: list[bytes] = []
    await conn.stream("/v1/chat/completions", body, lambda t, data: got.append(data))
    return got


def test_chunked_events_split_and_joined_across_chunks_and_the_connection_reused():
    stream = _chunked(b'data: {"a":1}\n\ndata: {"b"', b':2}\n\n', b"data:[DONE]\n\n")
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"

    async def run():
        srv = _Server([head + stream, head + stream])
        conn = StreamConn(await srv.start())
        try:
            first = await _read(conn, b'{"n":1}')
            second = await _read(conn, b'{"n":2}')
        finally:
            conn.close()
            srv.close()
        return srv, first, second

    srv, first, second = asyncio.run(run())
    assert first == second == [b'{"a":1}', b'{"b":2}', b"[DONE]"]
    assert srv.seen == [(0, b'{"n":1}'), (0, b'{"n":2}')]   # one keep-alive connection for both


def test_a_sized_body_and_a_server_that_closes_each_connection():
    body = b'data: {"x":"y"}\n\ndata: [DONE]\n\n'
    answer = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)

    async def run():
        srv = _Server([answer, answer], close_after=True)
        conn = StreamConn(await srv.start())
        try:
            got = [await _read(conn), await _read(conn)]
        finally:
            conn.close()
            srv.close()
        return srv, got

    srv, got = asyncio.run(run())
    assert got == [[b'{"x":"y"}', b"[DONE]"]] * 2 and srv.connections == 2


def test_a_refusal_raises_with_its_status_and_body():
    err = b'{"error":{"message":"no"}}'
    answer = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(err), err)

    async def run():
        srv = _Server([answer])
        conn = StreamConn(await srv.start())
        try:
            with pytest.raises(HTTPStatusError) as caught:
                await _read(conn)
        finally:
            conn.close()
            srv.close()
        return caught.value

    exc = asyncio.run(run())
    assert exc.status == 400 and exc.body == err


def test_the_callbacks_error_is_raised_and_a_cut_answer_is_an_error():
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    whole = head + _chunked(b"data: 1\n\ndata: 2\n\n")
    cut = head + b"%x\r\ndata: 1\n\n\r\n" % len(b"data: 1\n\n")   # no last chunk: the server closes instead

    def refuse(t, data):
        raise RuntimeError(f"refused {data!r}")

    async def run():
        srv = _Server([whole, cut], close_after=True)
        conn = StreamConn(await srv.start())
        try:
            with pytest.raises(RuntimeError, match="refused b'1'"):
                await conn.stream("/x", b"{}", refuse)
            with pytest.raises(ConnectionError):
                await _read(conn)
        finally:
            conn.close()
            srv.close()

    asyncio.run(run())


@pytest.mark.parametrize("text", ["", " word", '"usage":{', '"error"', "\\", '{"content":"', "\n", "é", "\u2028"])
def test_the_benchs_quick_read_of_a_content_chunk_is_the_parsed_one(text):
    """ops.gpu.serve_bench.content_chunk against json.loads on chunks as the server encodes them (the head once,
    the choice from a template: api.surfaces.openai_chunks), whatever the text."""
    import json

    from ops.gpu.serve_bench import content_chunk

    head = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp",'
    content = head + '"choices":[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}]' % (
        json.dumps(text))
    role = head + '"choices":[{"index":0,"delta":{"role":"assistant","content":%s},"logprobs":null,' \
                  '"finish_reason":null}]' % json.dumps(text)
    for body in (content + "}", content + ',"usage":null}', role + ',"usage":null}',
                 head + '"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}',
                 '{"error":{"message":%s}}' % json.dumps(text)):
        data = body.encode()
        chunk = json.loads(data)
        quick = content_chunk(data)
        if quick is None:   # parsed instead: nothing to compare
            continue
        assert "usage" not in chunk or chunk["usage"] is None
        assert "error" not in chunk
        assert quick == bool(chunk["choices"] and chunk["choices"][0]["delta"].get("content"))
    # the quick read takes the common chunk
    assert content_chunk((content + ',"usage":null}').encode()) == bool(text)
