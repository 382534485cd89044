"""Benchmark (not a test): the stored port across the split against the same port in process.

    .venv/bin/python -m ops.bench.stored_split [--ops 400] [--concurrency 1,16]

One embedded nats-server, one SharedRuntime answering on its rpc subjects (RuntimeRpcServer, as `aotx
boot`), and its stored port used two ways in the same run: in process (`runtime.stored.journal`, as
`aotx serve`) and through a gateway's RemoteStored (aotx.runtime.stored_remote, as `aotx gateway
--model-surfaces`: every call a NATS request/reply to the runtime). Per level of concurrency it times
`--ops` stored writes (CreateConversation, each journalled and acknowledged) and `--ops` reads
(`reads.conversation`) each way, and prints calls/s and the ratio remote ÷ in process. Each identity's
calls go to its owner; here there is one runtime, so the figure is the hop's own cost.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from aotx.runtime import GrantedRuntime, RemoteRuntime, RemoteStored, RuntimeRpcServer, SharedRuntime
from aotx.runtime_file import load_grants, write_grants
from aotx.stored import CreateConversation, Saved
from eventlog import EmbeddedNats, StreamSpec

SHA = "ef" * 32


async def _timed(calls, concurrency: int) -> float:
    """Seconds to run every call of `calls` (coroutine factories) with `concurrency` in flight."""
    todo = iter(calls)

    async def worker() -> None:
        for call in todo:
            await call()

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - t


async def _level(port, tag: str, n: int, concurrency: int) -> tuple[float, float]:
    """(writes/s, reads/s) of `port` at this concurrency."""
    identities = [f"bench-{tag}-{concurrency}-{i}" for i in range(max(1, concurrency))]
    ids = [f"conv_{tag}{concurrency:02x}{k:046x}" for k in range(n)]   # tag: one hex digit

    def write(k: int):
        async def go() -> None:
            out = await port.record(identities[k % len(identities)], CreateConversation(ids[k], 1_800_000_000))
            assert isinstance(out, Saved), out
        return go

    def read(k: int):
        async def go() -> None:
            view = await port.reads.conversation(identities[k % len(identities)], ids[k])
            assert view.id == ids[k], view
        return go

    wrote = await _timed([write(k) for k in range(n)], concurrency)
    read_s = await _timed([read(k) for k in range(n)], concurrency)
    return n / wrote, n / read_s


async def bench(args, tmp: Path) -> None:
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"stored split benchmark: {args.ops} writes and {args.ops} reads per level and way, concurrency {levels}; "
          f"pid {os.getpid()}; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    write_grants(tmp / "grants", {}, SHA)
    async with EmbeddedNats(tmp / "nats") as server:
        url, auth = server.url, server.auth()
        target = GrantedRuntime(SharedRuntime(url, StreamSpec(name="BENCHSPLIT", subject_prefix="bsp.j"),
                                              progress=False, nats_auth=auth), load_grants(tmp / "grants"))
        await target.start()
        rpc = await RuntimeRpcServer(target, url, "bench", auth=auth).start()
        remote = await RemoteRuntime(url, "bench", SHA, auth=auth).start()
        try:
            local, across = target.runtime.stored.journal, RemoteStored(remote)
            await _level(across, "c", 8, 1)   # warm: connections, the first round
            for c in levels:
                lw, lr = await _level(local, "a", args.ops, c)
                rw, rr = await _level(across, "b", args.ops, c)
                print(f"  concurrency {c:3d}: writes/s in process {lw:8.0f}, across the split {rw:8.0f} "
                      f"(ratio {rw / lw:.2f}); reads/s in process {lr:8.0f}, across the split {rr:8.0f} "
                      f"(ratio {rr / lr:.3f})", flush=True)
        finally:
            await remote.stop()
            await rpc.stop()
            await target.stop()
    print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=400)
    p.add_argument("--concurrency", default="1,16")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aotx-stored-split-") as tmp:
        asyncio.run(bench(args, Path(tmp)))


if __name__ == "__main__":
    main()
