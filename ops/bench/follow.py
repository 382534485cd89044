"""Benchmark (not a test): the CPU a follower spends applying another runtime's writes (issue 15).

    .venv/bin/python -m ops.bench.follow [--mutations 10000] [--lineages 64]

In follow mode every runtime applies every runtime's writes (aotx.runtime.follower: an ordered consumer
on the journal, each message fed to the projector under the writer's lock), so this cost does not divide
by the number of runtimes. One embedded nats-server (file storage, sync_interval always); the log is the
boot bench's (ops.bench.boot: set-member toggles and retirements decided by the pure core, one mutation a
journal message, `--lineages` writers in parallel), written by a child process ("the other runtime"), so
that the CPU time of this process is the follower's alone. Two streams, the same log on each:

* behind: a follow-mode runtime whose writer lock is held while the child writes the whole log (every
  message waits in the consumer's queue, as after a boot or a lease move, or on a saturated core); then
  the lock is released; this process's CPU from the first write to the last message applied, a message each
  (its wall time from the release is the drain's rate);
* live: a follow-mode runtime following while the child writes (each message arrives while the
  follower waits for it): this process's CPU from the first write to the last message applied.

Peers in the same run, on the first stream: a raw ordered consumer (nats-py, a callback counting), the
follower's read alone (Recorder.subscribe from 1, every message taken, no apply), a full replay
(SharedRuntime.start, no follower), and the projector fed from memory one message at a time (`feed`,
the follower's call) and in batches (`feed_many`, boot's). Every runtime's state hash is checked
against the replay's.
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
from types import SimpleNamespace

from aotx.runtime import SharedRuntime
from aotx.runtime.replay import Projector
from aotx.state import Capacities, state_hash
from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec

from .boot import RETIRE_EVERY, Generator, raw_read, read_alone, timed_boot, write_log


def _write(url: str, auth, spec: StreamSpec, names: list[str], ticks: dict[str, list[bytes]]) -> None:
    """The other runtime (a child process): appends the log, guarded and deduplicated as the runtime does."""
    gen = SimpleNamespace(names=names, ticks=ticks)
    asyncio.run(write_log(url, auth, spec, gen, 2))


def _writer(url: str, auth, spec: StreamSpec, gen: Generator) -> multiprocessing.Process:
    proc = multiprocessing.get_context("spawn").Process(target=_write, args=(url, auth, spec, gen.names, gen.ticks),
                                                        name="bench-follow-writer")
    proc.start()
    return proc


async def _until(predicate, proc: multiprocessing.Process | None = None, timeout: float = 600.0) -> None:
    """Wait until predicate() holds, looking every 20 ms (a poll's own CPU stays ~1 % of a message's
    apply); fails if the writer died without writing."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.exitcode not in (None, 0):
            raise RuntimeError(f"the writer process failed (exit code {proc.exitcode})")
        if time.monotonic() > deadline:
            raise TimeoutError("the follower did not reach the log's end")
        await asyncio.sleep(0.02)


async def _follower(url: str, auth, spec: StreamSpec, caps: Capacities) -> SharedRuntime:
    rt = SharedRuntime(url, spec, caps, progress=False, nats_auth=auth, follow=True)
    await rt.start()
    return rt


async def bench(n: int, k: int, tmp: Path) -> None:
    caps = Capacities()
    print(f"follow benchmark: {n} mutations, {k} lineages, one mutation per journal message; pid {os.getpid()}; "
          f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    gen = Generator(k, caps)
    gen.setup()
    for i in range(n):
        gen.mutation(i)
    total = sum(len(t) for t in gen.ticks.values())
    behind_spec = StreamSpec(name="BENCHFOLLOWA", subject_prefix="bf.a")
    live_spec = StreamSpec(name="BENCHFOLLOWB", subject_prefix="bf.b")
    out: dict[str, float] = {"mutations": n, "messages": total}
    async with EmbeddedNats(tmp / "nats") as server:
        url, auth = server.url, server.auth()

        # behind: the follower's lock held while the other runtime writes everything
        rt = await _follower(url, auth, behind_spec, caps)
        try:
            c = time.process_time()   # from the first write: the consumer's reading happens while the lock is held
            async with rt.writer.lock:
                proc = _writer(url, auth, behind_spec, gen)
                await asyncio.to_thread(proc.join)
                assert proc.exitcode == 0, proc.exitcode
            t = time.perf_counter()
            if os.environ.get("AOTX_BENCH_PROFILE"):   # a lab switch: cProfile of the drain
                import cProfile
                import pstats
                with cProfile.Profile() as prof:
                    await _until(lambda: rt.writer.applied_seq() >= total)
                pstats.Stats(prof).sort_stats(os.environ["AOTX_BENCH_PROFILE"]).print_stats(45)
            await _until(lambda: rt.writer.applied_seq() >= total)
            behind_cpu, behind_s = (time.process_time() - c) / total * 1e6, time.perf_counter() - t
            behind_hash = rt.state_hash()
        finally:
            await rt.stop()
        print(f"  follower behind (every message queued): {total / behind_s:8.0f} msg/s; "
              f"{behind_cpu:.1f} µs CPU a message", flush=True)

        # live: following while the other runtime writes
        rt = await _follower(url, auth, live_spec, caps)
        try:
            c = time.process_time()
            proc = _writer(url, auth, live_spec, gen)
            await _until(lambda: rt.writer.applied_seq() >= total, proc)
            live_cpu = (time.process_time() - c) / total * 1e6
            await asyncio.to_thread(proc.join)
            live_hash = rt.state_hash()
        finally:
            await rt.stop()
        print(f"  follower live (following the writes): {live_cpu:.1f} µs CPU a message", flush=True)

        # peers, on the first stream
        c = time.process_time()
        raw = await raw_read(url, auth, behind_spec, total)
        raw_cpu = (time.process_time() - c) / total * 1e6
        _, read_cpu, _, follow_read_cpu = await read_alone(url, auth, behind_spec, total)
        c = time.process_time()
        _, full = await timed_boot(url, auth, behind_spec, caps, snapshots=False)
        replay_cpu = (time.process_time() - c) / total * 1e6
        reference = full.state_hash()
        incarnation = full.projector.incarnation
        await full.stop()
        assert behind_hash == reference and live_hash == reference, "a follower's state differs from the replay's"
        print(f"  raw ordered consumer: {total / raw:8.0f} msg/s; {raw_cpu:.1f} µs CPU a message", flush=True)
        print(f"  the follower's read alone (subscribe from 1): {follow_read_cpu:.1f} µs CPU a message; "
              f"boot's read alone: {read_cpu:.1f}; full replay: {replay_cpu:.1f}", flush=True)

        rec = await JetStreamRecorder.connect(url, behind_spec, auth=auth, timeout=60.0)
        messages = [(m.subject, m.seq, m.data) async for m in rec.read(1)]
        await rec.close()
        one = Projector(behind_spec.name, incarnation, caps)
        c = time.process_time()
        for subject, seq, data in messages:
            one.feed(subject, seq, data)
        feed_one_cpu = (time.process_time() - c) / total * 1e6
        many = Projector(behind_spec.name, incarnation, caps)
        c = time.process_time()
        for i in range(0, len(messages), 256):
            many.feed_many(messages[i:i + 256])
        feed_many_cpu = (time.process_time() - c) / total * 1e6
        assert state_hash(one.state) == state_hash(many.state) == state_hash(full.projector.state)
        print(f"  projector from memory: feed one by one {feed_one_cpu:.1f} µs CPU a message, "
              f"feed_many {feed_many_cpu:.1f}", flush=True)
        print(f"  follower ÷ raw consumer, CPU rate: behind {raw_cpu / behind_cpu:.2f}×, live {raw_cpu / live_cpu:.2f}×; "
              f"replay {raw_cpu / replay_cpu:.2f}×", flush=True)
        out.update(behind_cpu_us=round(behind_cpu, 1), live_cpu_us=round(live_cpu, 1), raw_cpu_us=round(raw_cpu, 1),
                   follow_read_cpu_us=round(follow_read_cpu, 1), read_cpu_us=round(read_cpu, 1),
                   replay_cpu_us=round(replay_cpu, 1), feed_one_cpu_us=round(feed_one_cpu, 1),
                   feed_many_cpu_us=round(feed_many_cpu, 1), load_average_end=round(os.getloadavg()[0], 2))
    print(json.dumps(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.bench.follow")
    p.add_argument("--mutations", type=int, default=10_000, help="mutations in the log (default 10,000)")
    p.add_argument("--lineages", type=int, default=64, help="participants writing in parallel (default 64)")
    args = p.parse_args(argv)
    if args.lineages * (RETIRE_EVERY + 1) >= Capacities().receipts:
        p.error(f"--lineages × {RETIRE_EVERY + 1} must stay below the {Capacities().receipts} receipts")
    with tempfile.TemporaryDirectory(prefix="aotx-bench-follow-") as tmp:
        asyncio.run(bench(args.mutations, args.lineages, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
