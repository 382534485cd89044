"""Load for ops.gpu.serve_bench from several client processes, and the server's CPU time by process.

One Python client tops out near the rate a multi-worker server streams at (a read, the SSE framing and one
json.loads per chunk: ops.gpu.sse_client, one connection per stream), so `clients > 1` splits the streams over that many spawned processes; each opens its connections first, then
a barrier releases them together (CLOCK_MONOTONIC is system-wide, so their chunk stamps share one clock).

`server_cpu(pid)`: utime + stime seconds of the server's main process, of its HTTP workers (python
children) and of its nats-server (children by /proc/PID/comm), read from /proc.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import threading
import time
from typing import Callable

from ops.proc_cpu import children, comm, cpu_seconds


def server_cpu(pid: int) -> dict[str, float]:
    kids = children(pid)
    nats = [k for k in kids if comm(k).startswith("nats-server")]
    return {"main": cpu_seconds(pid), "workers": sum(cpu_seconds(k) for k in kids if k not in nats),
            "nats": sum(cpu_seconds(k) for k in nats)}


def cpu_per_token(before: dict[str, float], after: dict[str, float], tokens: int) -> dict[str, float]:
    """µs of server CPU per streamed token, by process kind and in all."""
    out = {f"cpu_us_per_token_{k}": (after[k] - before[k]) / max(tokens, 1) * 1e6 for k in before}
    out["cpu_us_per_token_all"] = sum(out.values())
    return out


def _part(base: str, ids: list[int], max_tokens: int, temperature: float, ready, go, out) -> None:
    """One client process: open one connection per stream with a 1-token request (the process's imports,
    the TCP handshakes: 0.1-1.3 s on a busy box before the first request), pass the `ready` barrier with the other clients and the parent, wait at `go`
    for the parent's start, then run the measured streams.
    Puts (release instant, results) on `out`, or the error's text."""
    try:
        from ops.gpu.serve_bench import one
        from ops.gpu.sse_client import StreamConn

        async def run() -> tuple[float, list[dict]]:
            conns = [StreamConn(base) for _ in ids]
            try:
                await asyncio.gather(*(one(conn, i, 1, temperature) for conn, i in zip(conns, ids)))
                await asyncio.to_thread(ready.wait, 600)
                await asyncio.to_thread(go.wait, 600)
                released = time.perf_counter()
                return released, await asyncio.gather(*(one(conn, i, max_tokens, temperature)
                                                        for conn, i in zip(conns, ids)))
            finally:
                for conn in conns:
                    conn.close()

        out.put(asyncio.run(run()))
    except BaseException as exc:   # the parent raises it: a client that failed must not look like a slow one
        ready.abort()              # the others (and the parent) stop waiting for it
        go.abort()
        out.put(f"client process failed: {exc!r}")
        raise


def split_load(base: str, concurrency: int, max_tokens: int, temperature: float, clients: int,
               at_start: Callable[[], None] | None = None) -> tuple[list, float]:
    """Every stream's result from `clients` processes, and the start instant. The clients are released
    together by a barrier once each has its connections open, so a client's own start-up (seconds on a busy
    box) is never counted as time to the first token; the start is the earliest client's release.
    `at_start()` runs once every client is ready and before any is released (the caller's "before"
    readings: the clients' warm-up requests stay out of them)."""
    parts = [list(range(c, concurrency, clients)) for c in range(clients)]
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Barrier(len(parts) + 1), ctx.Barrier(len(parts) + 1), ctx.Queue()
    procs = [ctx.Process(target=_part, args=(base, ids, max_tokens, temperature, ready, go, out), daemon=True)
             for ids in parts]
    for p in procs:
        p.start()
    try:
        try:
            ready.wait(900)
            try:
                if at_start is not None:
                    at_start()
            except BaseException:
                go.abort()         # the clients stop waiting: the caller's error is raised below
                raise
            go.wait(900)
        except threading.BrokenBarrierError:
            pass                   # a client failed: its message is on `out`
        got = [out.get(timeout=900) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
    failed = [g for g in got if isinstance(g, str)]
    if failed:
        raise RuntimeError(failed[0])
    return [r for _, results in got for r in results], min(released for released, _ in got)
