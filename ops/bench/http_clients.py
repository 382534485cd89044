"""HTTP clients in processes of their own, for a benchmark whose server must not share its process
(and its event loop) with the clients that load it (ops.bench.mutations `--client-processes`).

`post_all(port, jobs)`: one process per job, each a keep-alive `http.client` connection that POSTs
its requests in order (each must answer 201), all starting together (a barrier); returns the wall
time from the first start to the last end and every request's latency. Runs in a thread, so the
caller's event loop (the server) goes on serving meanwhile.
"""

from __future__ import annotations

import asyncio
import http.client
import multiprocessing as mp
import time

Job = list[tuple[str, bytes, dict[str, str]]]   # (path, body, headers) per request, in order


def _client(port: int, job: Job, start, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.connect()
    lat = []
    start.wait()
    t0 = time.perf_counter()   # CLOCK_MONOTONIC: comparable across processes
    for path, body, headers in job:
        t = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        if r.status != 201:
            out.put(("error", f"{path}: {r.status} {data[:200]!r}"))
            return
        lat.append(time.perf_counter() - t)
    out.put(("ok", (t0, time.perf_counter(), lat)))
    conn.close()


def _run(port: int, jobs: list[Job]) -> tuple[float, list[float]]:
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(port, job, start, out), daemon=True) for job in jobs]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(10)
    errors = [r for kind, r in results if kind == "error"]
    if errors:
        raise RuntimeError(f"HTTP client failed: {errors[0]}")
    spans = [r for _, r in results]
    wall = max(end for _, end, _ in spans) - min(begin for begin, _, _ in spans)
    return wall, [x for _, _, lat in spans for x in lat]


async def post_all(port: int, jobs: list[Job]) -> tuple[float, list[float]]:
    return await asyncio.to_thread(_run, port, jobs)
