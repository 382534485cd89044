"""Benchmark (not a test): pipelined command rounds against one round at a time, alternated, with the CPU of
the runtime's process and of nats-server per mutation.

    .venv/bin/python -m ops.bench.pipeline_ab [--n 1600] [--repeat 5] [--clients 8] [--loop asyncio|uvloop]

One embedded nats-server (file storage, sync_interval always) and one runtime, the load of
ops.bench.mutations (each client a participant toggling another's rights in its own space, a
retirement every 64th sequence). Each repetition runs, in this order: raw `js.publish` with `--clients`
in flight (the peer), then the runtime's `--clients` participants at depth 1 (one command round at a
time), depth 2 (the default), depth 2 and 3 with a queue split in two cohorts (aotx.runtime.pipeline). Prints
per mode the median rate, the median of each repetition's ratio to the raw peer of the same
repetition, and the CPU per mutation of this process (the runtime and the bench's clients) and of
nats-server, so that a loaded machine's share shows: rate × (both CPUs) is the cores they used.
"""
from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from api.server import run_serving
from aotx.runtime import SharedRuntime
from aotx.state import Capacities, MutationKind
from eventlog import EmbeddedNats, StreamSpec, connect
from ops.bench.mutations import concurrent, prepared_load, submitter
from ops.proc_cpu import cpu_seconds

MODES = {"raw": None, "depth 1": (1, False), "depth 2": (2, False), "depth 2, split": (2, True),
         "depth 3, split": (3, True)}


async def runtime_and_raw(server, clients: int):
    """A started runtime (64 participants) with `clients` members' load prepared, a connection, and the two
    ops the benches compare: a raw JetStream publish of an 817-byte tick and one durable set-member mutation."""
    rt = SharedRuntime(server.url, StreamSpec(name="BENCH", subject_prefix="bench.j"),
                       Capacities(participants=64), progress=False, nats_auth=server.auth())
    await rt.start()
    submit = submitter(rt)
    load = await prepared_load(rt, clients)
    nc = await connect(server.url, server.auth(), name="aotx-bench")
    js = nc.jetstream()
    await js.add_stream(StreamSpec(name="BENCHRAW", subject_prefix="raw.j").config())
    payload, counter = secrets.token_bytes(817), iter(range(1 << 30))

    async def raw_pub(c, i):
        await js.publish(f"raw.j.c{c}.tick", payload, headers={"Nats-Msg-Id": f"m{next(counter)}"})

    async def rt_op(c, i):
        name, raw, space = load.next_member(c, i)
        await submit(name, MutationKind.SET_MEMBER if space else MutationKind.RETIRE, raw, space)
        load.seq[name] += 1
    return rt, nc, raw_pub, rt_op


async def bench(n: int, repeat: int, clients: int, tmp: Path) -> None:
    async with EmbeddedNats(tmp / "nats") as server:
        rt, nc, raw_pub, rt_op = await runtime_and_raw(server, clients)

        nats_pid = server.pid or 0
        rates: dict[str, list[float]] = {m: [] for m in MODES}
        mine: dict[str, list[float]] = {m: [] for m in MODES}
        theirs: dict[str, list[float]] = {m: [] for m in MODES}
        per = n // clients * clients
        for _ in range(repeat):
            for mode, setting in MODES.items():
                c0, s0 = time.process_time(), cpu_seconds(nats_pid)
                if setting is None:
                    wall, _ = await concurrent(clients, n // clients, raw_pub)
                else:
                    rt.commands.depth, rt.commands.split = setting
                    wall, _ = await concurrent(clients, n // clients, rt_op)
                rates[mode].append(per / wall)
                mine[mode].append((time.process_time() - c0) / per * 1e6)
                theirs[mode].append((cpu_seconds(nats_pid) - s0) / per * 1e6)
        print(f"{clients} clients, {per} mutations a run, {repeat} repetitions (modes in this order each time)")
        for mode in MODES:
            rate, a, b = (statistics.median(x[mode]) for x in (rates, mine, theirs))
            ratio = statistics.median(r / raw for r, raw in zip(rates[mode], rates["raw"]))
            print(f"  {mode:<18} {rate:7.0f}/s  {ratio:5.2f}× raw  CPU a mutation: this process {a:4.0f} µs, "
                  f"nats-server {b:4.0f} µs ({rate * (a + b) / 1e6:.2f} cores)  runs {[round(r) for r in rates[mode]]}")
        await nc.close()
        await rt.stop()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m ops.bench.pipeline_ab")
    p.add_argument("--n", type=int, default=1600, help="mutations per run (default 1600)")
    p.add_argument("--repeat", type=int, default=5, help="repetitions of every mode (default 5)")
    p.add_argument("--clients", type=int, default=8, help="concurrent participants / publishers (default 8)")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                   help="the event loop (default asyncio, as the figures before; uvloop is what `aotx serve` runs)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_serving if args.loop == "uvloop" else asyncio.run
        print(f"event loop: {args.loop}")
        run(bench(args.n, args.repeat, args.clients, Path(tmp)))


if __name__ == "__main__":
    main()
