"""Load for ops.gpu.serve_bench from several client processes, and the server's CPU time by process.

One Python client tops out near the rate a multi-worker server streams at (httpx + JSON per chunk), so
`clients > 1` splits the streams over that many spawned processes; they start together at one
monotonic instant (CLOCK_MONOTONIC is system-wide, so their chunk stamps share the parent's clock).

`server_cpu(pid)`: utime + stime seconds of the server's main process, of its HTTP workers (python
children) and of its nats-server (children by /proc/PID/comm), read from /proc.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time

import httpx


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(k) for k in f.read().split()]
    except FileNotFoundError:
        pass
    return out


def _cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def server_cpu(pid: int) -> dict[str, float]:
    kids = _children(pid)
    nats = [k for k in kids if _comm(k).startswith("nats-server")]
    return {"main": _cpu(pid), "workers": sum(_cpu(k) for k in kids if k not in nats),
            "nats": sum(_cpu(k) for k in nats)}


def cpu_per_token(before: dict[str, float], after: dict[str, float], tokens: int) -> dict[str, float]:
    """µs of server CPU per streamed token, by process kind and in all."""
    out = {f"cpu_us_per_token_{k}": (after[k] - before[k]) / max(tokens, 1) * 1e6 for k in before}
    out["cpu_us_per_token_all"] = sum(out.values())
    return out


def _warm(_: int) -> None:
    import ops.gpu.serve_bench  # noqa: F401  (imports done before the clock starts)


def _part(base: str, ids: list[int], max_tokens: int, temperature: float, start_at: float) -> list[dict]:
    from ops.gpu.serve_bench import one

    async def run() -> list[dict]:
        limits = httpx.Limits(max_connections=len(ids) + 4, max_keepalive_connections=len(ids) + 4)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
            return await asyncio.gather(*(one(client, base, i, max_tokens, temperature) for i in ids))

    return asyncio.run(run())


def split_load(base: str, concurrency: int, max_tokens: int, temperature: float, clients: int) -> tuple[list, float]:
    """Every stream's result from `clients` processes, and the shared start instant."""
    parts = [list(range(c, concurrency, clients)) for c in range(clients)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(clients) as pool:
        pool.map(_warm, range(clients), chunksize=1)   # every interpreter up and its imports done
        start_at = time.perf_counter() + 0.5
        async_results = [pool.apply_async(_part, (base, ids, max_tokens, temperature, start_at)) for ids in parts]
        results = [r for a in async_results for r in a.get(timeout=900)]
    return results, start_at
