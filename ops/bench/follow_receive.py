"""Benchmark (not a test): the CPU of reading a journal without applying it, per message, three ways, in one run:
the follower's (an ordered consumer taken in runs: `JetStreamRecorder.subscribe(headers=False)` and
`take_waiting`), boot's (`read_batches`: direct gets through a raw handler) and nats-py's own ordered consumer
with a callback (ops.bench.boot's "raw ordered consumer", the replay target's denominator).

    .venv/bin/python -m ops.bench.follow_receive [--participants 40] [--mutations 60] [--callgrind]

One embedded nats-server; ops.bench.follow_cost's writer fills the journal with member-rights changes
(cluster_scale's mutations). Each read runs in a process of its own, once to warm up (imports, first calls)
and once measured: µs of CPU a message, or with `--callgrind` instructions a message (the process under
`valgrind --tool=callgrind --instr-atstart=no`, counted over the measured read only).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = ("FOLLOWCOST", "followcost.j")   # ops.bench.follow_cost's journal
READS = ("follow", "bulk", "raw")


def _callgrind(on: bool) -> None:
    if os.environ.get("AOTX_FOLLOW_RECEIVE_CALLGRIND"):
        subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], check=True,
                       stdout=subprocess.DEVNULL)


async def _follow(url: str, spec, last: int) -> None:
    from eventlog import JetStreamRecorder
    rec = await JetStreamRecorder.connect(url, spec)
    sub = await rec.subscribe(1, headers=False)
    try:
        async for msg in sub:
            if [msg, *sub.take_waiting(255)][-1].seq >= last:
                break
    finally:
        await sub.close()
        await rec.close()


async def _bulk(url: str, spec, last: int) -> None:
    from eventlog import JetStreamRecorder
    rec = await JetStreamRecorder.connect(url, spec)
    try:
        n = 0
        async for messages in rec.read_batches(1):
            n += len(messages)
        assert n == last, (n, last)
    finally:
        await rec.close()


async def _raw(url: str, spec, last: int) -> None:
    from eventlog import connect
    nc = await connect(url, None, name="bench-raw")
    got, done = 0, asyncio.Event()

    async def cb(msg) -> None:
        nonlocal got
        got += 1
        if got >= last:
            done.set()

    sub = await nc.jetstream().subscribe(f"{spec.subject_prefix}.>", stream=spec.name, ordered_consumer=True, cb=cb)
    await done.wait()
    await sub.unsubscribe()
    await nc.close()


async def reader(url: str, how: str) -> dict:
    from eventlog import JetStreamRecorder, StreamSpec
    spec = StreamSpec(name=SPEC[0], subject_prefix=SPEC[1])
    rec = await JetStreamRecorder.connect(url, spec)
    last = (await rec.stream_info()).last_seq
    await rec.close()
    read = {"follow": _follow, "bulk": _bulk, "raw": _raw}[how]
    await read(url, spec, last)   # (warm: imports and first calls outside the count)
    _callgrind(True)
    c = time.process_time()
    await read(url, spec, last)
    cpu = time.process_time() - c
    _callgrind(False)
    return {"messages": last, "cpu": cpu}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.follow_receive")
    ap.add_argument("--participants", type=int, default=40)
    ap.add_argument("--mutations", type=int, default=60)
    ap.add_argument("--callgrind", action="store_true", help="instructions a message, under callgrind")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role:
        print(json.dumps(asyncio.run(reader(args.url, args.role))))
        return 0
    from eventlog import EmbeddedNats
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="aotx-follow-receive-") as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        url = server.client_url()
        subprocess.run([sys.executable, "-m", "ops.bench.follow_cost", "--url", url, "--role", "w", "--members",
                        "--participants", str(args.participants), "--mutations", str(args.mutations)],
                       stdout=subprocess.DEVNULL, env=env, check=True)
        out = []
        for how in READS:
            grind = Path(tmp) / f"callgrind.{how}"
            under = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={grind}"] \
                if args.callgrind else []
            p = subprocess.run(under + [sys.executable, "-m", "ops.bench.follow_receive", "--url", url, "--role", how],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if args.callgrind else None, check=True,
                               env={**env, **({"AOTX_FOLLOW_RECEIVE_CALLGRIND": "1"} if args.callgrind else {})})
            got = json.loads(p.stdout)
            n = got["messages"]
            if args.callgrind:
                with open(grind) as f:
                    ir = next(int(line.split()[1]) for line in f if line.startswith("totals:"))
                out.append(f"{how} {ir / n:,.0f} instructions")
            else:
                out.append(f"{how} {1e6 * got['cpu'] / n:.1f} µs CPU")
    print(f"load {os.getloadavg()[0]:.2f}; {n:,} messages read, a message: " + "; ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
