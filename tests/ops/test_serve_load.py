"""ops.gpu.serve_load.split_load: the client processes' own start-up is never counted as time to the first token."""
from __future__ import annotations

import asyncio
import json
import threading
import time

from ops.gpu.serve_load import split_load
from tests.ops.http_stub import read_request_body

_BODY = (b'data: {"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}\n\n'
         b'data: {"choices":[],"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n')


class _Server:
    """A keep-alive HTTP/1.1 server on a thread: every POST gets one short SSE stream; it records when each
    connection was accepted and when each request (its max_tokens) arrived."""

    def __init__(self) -> None:
        self.accepted: list[tuple[int, float]] = []
        self.requests: list[tuple[int, int, float]] = []   # (connection, max_tokens, arrival)
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _start(self) -> int:
        self._srv = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        return self._srv.sockets[0].getsockname()[1]

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cid = len(self.accepted)
        self.accepted.append((cid, time.perf_counter()))
        while (raw := await read_request_body(reader)) is not None:
            body = json.loads(raw)
            self.requests.append((cid, body["max_tokens"], time.perf_counter()))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(_BODY), _BODY))
            await writer.drain()
        writer.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._srv.close)
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_every_client_has_its_connections_open_before_the_measured_streams_start():
    srv = _Server()
    marks = []
    try:
        results, t0 = split_load(f"http://127.0.0.1:{srv.port}", 4, 7, 0.7, 2,
                                 lambda: marks.append((len(srv.requests), time.perf_counter())))
    finally:
        srv.close()
    assert len(results) == 4 and all(r["tokens"] == 1 and len(r["stamps"]) == 1 for r in results)
    measured = [(cid, at) for cid, max_tokens, at in srv.requests if max_tokens == 7]
    assert len(measured) == 4
    first_measured = min(at for _, at in measured)
    # the clock starts at the clients' release, not before: no measured request precedes it
    assert t0 <= first_measured
    # every measured stream rides a connection that was opened and had served a request before the clock
    # started: a client process's start-up (its AsyncClient, imports, TCP handshakes) is outside the TTFT
    opened = dict(srv.accepted)
    assert all(opened[cid] < t0 for cid, _ in measured)
    assert all(any(c == cid and at < t0 for c, _, at in srv.requests) for cid, _ in measured)
    # the caller's "before" readings come after every warm-up request and before any measured one
    [(seen, at)] = marks
    assert seen == 4 and all(m == 1 for _, m, _ in srv.requests[:seen]) and at < first_measured
    assert all(r["stamps"][0] > t0 for r in results)
