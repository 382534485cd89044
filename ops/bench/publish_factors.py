"""Benchmark (not a test): nats-server's CPU per JetStream message for each way the runtime's appends
differ from the raw publish peer, one factor at a time, alternated in one run.

    .venv/bin/python -m ops.bench.publish_factors [--n 4000] [--repeat 3] [--clients 8]

One embedded nats-server (file storage, sync_interval always) and one nats-py connection. Every variant
publishes 817-byte messages with a `Nats-Msg-Id` through `js.publish`, `--clients` in flight, each
client on its own subject of its own stream (the runtime writes one subject per lineage: 8 subjects for
8 participants), and differs from the raw peer (`ops.bench.mutation_profile`'s) by one thing:

  raw                   the peer: `Nats-Msg-Id` only
  + expected stream     `stream=` (the `Nats-Expected-Stream` header the runtime's appends carry)
  + last-subject seq    `Nats-Expected-Last-Subject-Sequence` (the guard: each client's last ack's seq)
  + both guards         the runtime's header set (both of the above)
  rounds of N           the raw peer sent as the runtime's command rounds send: N at once, then all N acks
  client busy X µs      the raw peer with X µs of this process's CPU spent before each publish (a client
                        as slow as the runtime: fewer messages reach nats-server per wake-up)

Per variant: the rate, this process's CPU and nats-server's CPU per message, and nats-server's read and
write system calls and the times one of its threads was put on a CPU, per message (`server_counts`; the
median of the repetitions; each repetition runs every variant, the order rotated by one each time).
"""
from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from eventlog import EmbeddedNats, StreamSpec, connect
from ops.proc_cpu import cpu_seconds

PAYLOAD = 817


def server_counts(pid: int) -> tuple[int, int, int]:
    """(read syscalls, write syscalls, times a thread was put on a CPU) of process `pid` so far, all its
    live threads: /proc/<pid>/io's syscr and syscw, the second field of each task's schedstat."""
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    runs = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            runs += int((task / "schedstat").read_text().split()[2])
        except (OSError, IndexError, ValueError):   # a thread that ended between the listing and the read
            continue
    return int(io["syscr"]), int(io["syscw"]), runs


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def variants(js, clients: int, busy_us: float):
    """name → an async op(client, i) publishing one message (or one round of `clients`)."""
    payload, counter = secrets.token_bytes(PAYLOAD), iter(range(1 << 40))
    ops = {}

    async def made(name: str, *, stream: bool = False, guard: bool = False, busy: float = 0.0):
        spec = StreamSpec(name=f"F{len(ops)}", subject_prefix=f"f{len(ops)}.j")
        await js.add_stream(spec.config())
        last = [0] * clients
        prefix, sname = spec.subject_prefix, spec.name

        async def op(c: int, i: int) -> None:
            if busy:
                spin(busy)
            headers = {"Nats-Msg-Id": f"m{next(counter)}"}
            if guard:
                headers["Nats-Expected-Last-Subject-Sequence"] = str(last[c])
            ack = await js.publish(f"{prefix}.c{c}.tick", payload, headers=headers,
                                   stream=sname if stream else None)
            last[c] = ack.seq
        ops[name] = op

    await made("raw")
    await made("+ expected stream", stream=True)
    await made("+ last-subject seq", guard=True)
    await made("+ both guards", stream=True, guard=True)
    await made(f"client busy {busy_us:.0f} µs", busy=busy_us / 1e6)
    spec = StreamSpec(name="FROUNDS", subject_prefix="fr.j")
    await js.add_stream(spec.config())

    async def rounds(c: int, i: int) -> None:   # client 0 sends a round of `clients`; the others idle
        await asyncio.gather(*(js.publish(f"fr.j.c{k}.tick", payload, headers={"Nats-Msg-Id": f"m{next(counter)}"})
                               for k in range(clients)))
    ops[f"rounds of {clients}"] = rounds
    return ops


async def run(op, clients: int, per_client: int, single: bool) -> float:
    async def worker(c: int) -> None:
        for i in range(per_client):
            await op(c, i)
    t0 = time.perf_counter()
    if single:
        await worker(0)
    else:
        await asyncio.gather(*(worker(c) for c in range(clients)))
    return time.perf_counter() - t0


async def bench(n: int, repeat: int, clients: int, busy_us: float, tmp: Path) -> None:
    async with EmbeddedNats(tmp / "nats") as server:
        nc = await connect(server.url, server.auth(), name="aotx-bench")
        js = nc.jetstream()
        ops = await variants(js, clients, busy_us)
        names, pid = list(ops), server.pid or 0
        for name in names:   # warm
            await run(ops[name], clients, 20, name.startswith("rounds"))
        got: dict[str, list[tuple[float, float, float]]] = {m: [] for m in names}
        for r in range(repeat):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                single = name.startswith("rounds")
                per = n // clients * clients
                c0, s0, k0 = time.process_time(), cpu_seconds(pid), server_counts(pid)
                wall = await run(ops[name], clients, n // clients, single)
                k1 = server_counts(pid)
                got[name].append((per / wall, (time.process_time() - c0) / per * 1e6,
                                  (cpu_seconds(pid) - s0) / per * 1e6, *((b - a) / per for a, b in zip(k0, k1))))
        base = statistics.median(x[2] for x in got["raw"])
        print(f"{clients} in flight, {n} messages of {PAYLOAD} bytes a run, {repeat} repetitions (medians)")
        for name in names:
            rate, mine, theirs, reads, writes, runs_on = (statistics.median(x[k] for x in got[name]) for k in range(6))
            runs = " / ".join(f"{x[2]:.0f}" for x in got[name])
            print(f"  {name:<20} {rate:7.0f}/s  this process {mine:4.0f} µs, nats-server {theirs:4.0f} µs "
                  f"({theirs - base:+4.0f} vs raw; runs {runs}); its reads {reads:.2f}, writes {writes:.2f}, "
                  f"thread runs {runs_on:.2f} a message")
        await nc.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m ops.bench.publish_factors")
    p.add_argument("--n", type=int, default=4000, help="messages per variant and repetition (default 4000)")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    p.add_argument("--clients", type=int, default=8, help="publishes in flight (default 8)")
    p.add_argument("--busy-us", type=float, default=230.0,
                   help="the busy client's CPU per message before it publishes (default 230 µs)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(args.n, args.repeat, args.clients, args.busy_us, Path(tmp)))


if __name__ == "__main__":
    main()
