"""Benchmark (not a test): a follower's wait for the next message, nats-py's iterator against the queue wait.

    .venv/bin/python -m ops.bench.follow_wait [--messages 3000] [--rounds 3]

A follower that keeps up waits for every message (nothing is queued when it asks). eventlog's
JetStreamSubscription waited through nats-py's message iterator (a task and an asyncio.wait for every
message); it now awaits nats-py's subscription queue itself. One embedded nats-server (file storage,
sync_interval always), one subscription from the stream's start; a child process appends `--messages`
messages (800 bytes, each awaiting its ack, as a writer does) while this process takes them one by one,
alternately through nats-py's iterator (`sub._messages.__anext__()`, the old wait) and through
`JetStreamSubscription.__anext__` (the new), `--rounds` times each: this process's CPU a message is the
follower's read (nats-py's parsing and the wait), without the writer's.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec
from eventlog.jetstream import _stored


def _append(url: str, auth, spec: StreamSpec, n: int, size: int) -> None:
    """The writer (a child process): `n` appends, each awaiting its ack, as a runtime's writer appends."""
    async def run() -> None:
        rec = await JetStreamRecorder.connect(url, spec, auth=auth, timeout=30.0)
        try:
            for _ in range(n):
                await rec.append(spec.subject("l1", "tick"), b"x" * size)
        finally:
            await rec.close()
    asyncio.run(run())


async def bench(n: int, rounds: int, tmp: Path) -> None:
    spec = StreamSpec(name="BENCHWAIT", subject_prefix="bw.j")
    print(f"follow wait benchmark: {n} messages a round, {rounds} rounds a way; load average "
          f"{os.getloadavg()[0]:.2f} at start", flush=True)
    ctx = multiprocessing.get_context("spawn")
    async with EmbeddedNats(tmp / "nats") as server:
        url, auth = server.url, server.auth()
        rec = await JetStreamRecorder.connect(url, spec, auth=auth, timeout=30.0)
        sub = await rec.subscribe(1)
        results: dict[str, list[float]] = {"nats-py iterator": [], "queue wait": []}

        async def old_wait():   # what JetStreamSubscription.__anext__ did with nothing waiting
            return _stored(await sub._messages.__anext__())

        try:
            for _ in range(rounds):
                for way in results:
                    take = old_wait if way == "nats-py iterator" else sub.__anext__
                    proc = ctx.Process(target=_append, args=(url, auth, spec, n, 800), name="bench-wait-writer")
                    c = time.process_time()
                    proc.start()
                    for _ in range(n):
                        msg = await take()
                        assert len(msg.data) == 800
                    results[way].append((time.process_time() - c) / n * 1e6)
                    await asyncio.to_thread(proc.join)
                    assert proc.exitcode == 0, proc.exitcode
        finally:
            await sub.close()
            await rec.close()
    for way, cpu in results.items():
        print(f"  {way:17s}: {', '.join(f'{v:.1f}' for v in cpu)} µs CPU a message", flush=True)
    old, new = min(results["nats-py iterator"]), min(results["queue wait"])
    print(f"  queue wait ÷ nats-py iterator, best round each: {new / old:.2f}× ({old - new:.1f} µs a message less)",
          flush=True)
    print(json.dumps({"messages": n, "rounds": rounds, **{k: [round(v, 1) for v in vs] for k, vs in results.items()},
                      "load_average_end": round(os.getloadavg()[0], 2)}), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.bench.follow_wait")
    p.add_argument("--messages", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aotx-bench-wait-") as tmp:
        asyncio.run(bench(args.messages, args.rounds, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
