"""Benchmark (not a test): durable shared mutations/s with 1, 2 and 3 runtimes on a 3-node
JetStream cluster, against the cluster's own publish rate, in one run (issue 15 part 5).

    .venv/bin/python -m ops.bench.cluster_scale [--runtimes 1,2,3] [--participants 48]
                                                [--seconds 10] [--client-procs 4] [--retire-every 16]

Starts an EmbeddedCluster (3 nodes, sync_interval always, its one user). Then:

* the cluster's ceiling: `--participants` raw publishers (nats-py, awaited acks, one subject each,
  400-byte messages, expected-last-subject-sequence guards like the runtime's) for `--seconds`;
* for each R in `--runtimes`: a fresh journal (its own runtime file and stream, `level_file`), R `aotx boot
  --leases --no-model` processes, and `--client-procs` client processes (RemoteRuntime, as a gateway
  talks to runtimes) sharing the participants: each registers, creates a private space, then toggles
  another participant's rights there (every 16th sequence retires its receipts) as fast as its
  answers come, for `--seconds`. Aggregate acknowledged mutations/s, the ratio to R = 1 and to the
  raw ceiling are printed. The participants' lineages spread over the runtimes by their leases.

A second table says what bounded each level: the clients' median and p99 mutation latency, and the CPU
each runtime, the three nats-server nodes and the client processes used over the measured seconds (in
cores: 1.00 = one core busy the whole time; a runtime near 1.00 is bound by its GIL). With every
participant's next mutation waiting for its last, the rate is participants ÷ latency: where no runtime is
near a core, more runtimes cannot raise it, more participants can (`--participants`, with
`--retire-every` lowered so that participants × retire-every fits the receipt table).

A third table says what each runtime did over the window (its aotx.runtime.round_stats counters, which the
bench switches on for its runtimes: rounds, their stages, the follower, read-backs, the queue; columns in
ops/bench/cluster_inside.py), and a last line splits the runtimes' CPU into µs per own mutation and per
message of another runtime applied, with the ratio R runtimes would reach at a full core each. The
header names AOTX_FOLLOW_WAIT / AOTX_COMMAND_PIPELINE where they were set (they reach the runtimes).
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

from aotx.runtime_file import pack_shared, write_grants
from aotx.state import Capacities
from eventlog import ConcurrencyConflict, DEFAULT_USER, EmbeddedCluster, JetStreamRecorder, StreamSpec
from aotx.runtime import round_stats
from aotx.runtime.write_order import SPURIOUS_RETRIES, spurious_conflict
from ops.proc_cpu import cpu_seconds, main_thread_cpu
from ops.bench.cluster_inside import cpu_split, inside_rows, inside_table

CONFIG_SHA = "be" * 32
RETIRE_EVERY = 16   # (--retire-every) 48 participants × 16 receipts stay inside the default 1,024-receipt table
ALL = ["shared_read", "shared_write", "shared_manage"]


async def raw_ceiling(cluster: EmbeddedCluster, publishers: int, seconds: float) -> float:
    spec = StreamSpec(name="RAWCEIL", subject_prefix="raw.j")
    rec = await JetStreamRecorder.connect(cluster.urls, spec, auth=cluster.auth(), timeout=10)
    count, stop_at = 0, time.monotonic() + seconds

    async def one(i: int) -> None:
        nonlocal count
        subject, last = spec.subject(f"{i:032x}", "tick"), 0
        while time.monotonic() < stop_at:
            for attempt in range(SPURIOUS_RETRIES + 1):   # (as the runtime's writer does: write_order)
                try:
                    last = (await rec.append(subject, b"x" * 400, expected_last_subject_seq=last)).seq
                    break
                except ConcurrencyConflict:
                    if attempt == SPURIOUS_RETRIES or not await spurious_conflict(rec, subject, last):
                        raise
            count += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(publishers)))
    wall = time.perf_counter() - t0
    await rec.close()
    return count / wall


def start_runtime(rf, grants: Path, cluster: EmbeddedCluster, log: Path, stats: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ops.cli", "boot", "--runtime", str(rf.path), "--nats", cluster.urls, "--nats-user",
           DEFAULT_USER, "--nats-password-file", str(cluster.password_file()), "--service-grants", str(grants),
           "--no-model", "--leases"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "wb"),
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", round_stats.ENV: str(stats)})
    deadline = time.monotonic() + 120
    while b"booted" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"aotx boot did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    return proc


def start_clients(args, rf, cluster: EmbeddedCluster, names: list[str], start_at: float) -> list[subprocess.Popen]:
    per = [names[i::args.client_procs] for i in range(args.client_procs)]
    return [subprocess.Popen(
        [sys.executable, "-m", "ops.bench.cluster_scale", "--client", json.dumps({
            "urls": cluster.urls, "password_file": str(cluster.password_file()), "name": rf.name,
            "names": chunk, "others": names, "start_at": start_at, "seconds": args.seconds,
            "retire_every": args.retire_every})],
        stdout=subprocess.PIPE, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}) for chunk in per if chunk]


async def client(spec: dict) -> dict:
    """One client process: its participants' setup, then mutations until the deadline."""
    from aotx.runtime import RemoteRuntime, submit_body
    from aotx.state import Actor, Grants, MutationKind, lineage_for
    from eventlog import NatsAuth
    password = Path(spec["password_file"]).read_text().strip()
    remote = await RemoteRuntime(spec["urls"], spec["name"], CONFIG_SHA, timeout=30,
                                 auth=NatsAuth(user=DEFAULT_USER, password=password)).start()
    seqs = {n: 1 for n in spec["others"]}

    def body(n: str, **fields) -> bytes:
        return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(n).hex(),
                           "operation_key": os.urandom(16).hex(), "sequence": str(seqs[n]), **fields}).encode()

    give_up = time.monotonic() + 120 + spec["seconds"]   # nothing here waits past this

    async def ok(n: str, kind, raw, resource=None) -> dict:
        out = None
        while time.monotonic() < give_up:
            out = await submit_body(remote, Actor(n, Grants.all()), kind, raw, resource)
            if out.status in (200, 201):
                seqs[n] += 1
                return out.body
            if out.status not in (429, 503):
                raise RuntimeError(f"{n} {kind}: {out.status} {out.body}")
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{n} {kind}: no answer but 'retry later' for 120 s; the last: {out.status} {out.body}")
    spaces, done = {}, 0
    for n in spec["names"]:
        await ok(n, MutationKind.REGISTER, body(n))
        spaces[n] = (await ok(n, MutationKind.CREATE_SPACE, body(n, scope="private")))["resource"]
    ids: dict[str, str] = {}
    for name in spec["others"][:2]:   # the first two participants' ids, once registered (by their clients)
        while name not in ids:
            if time.monotonic() > give_up:
                raise RuntimeError(f"{name} was never registered")
            out = await remote.query("participant", Actor(name, Grants.all()))
            if out.status == 200 and out.body.get("participant"):
                ids[name] = out.body["participant"]
            else:
                await asyncio.sleep(0.05)
    first, second = spec["others"][:2]
    await asyncio.sleep(max(0.0, spec["start_at"] - time.time()))
    stop_at = time.monotonic() + spec["seconds"]

    latencies: list[float] = []

    async def loop(n: str) -> None:
        nonlocal done
        i = 0
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            if seqs[n] % spec["retire_every"] == 0:   # (the 1,024-receipt table holds every participant's)
                await ok(n, MutationKind.RETIRE, body(n, retry_floor=str(seqs[n])))
            else:
                other = ids[second] if n == first else ids[first]   # (an owner's own rights never change)
                await ok(n, MutationKind.SET_MEMBER, body(n, participant=other,
                                                         permissions=["read"] if i % 2 else ["read", "write"]),
                         spaces[n])
            latencies.append(time.monotonic() - t0)
            done += 1
            i += 1
    await asyncio.gather(*(loop(n) for n in spec["names"]))
    await remote.stop()
    return {"done": done, "seconds": spec["seconds"], "latencies": latencies}


def level_file(root: Path, r: int):
    """The runtime file of level R: a journal of its own (stream CS<R>, subjects cs<R>.j.*, and so its own
    snapshot and lease buckets). (Every level once shared AOTX_JOURNAL: level 2 booted on level 1's 48
    lineages and their receipts, 96 participants × up to 16 receipts in one 1,024-row table.)"""
    rf, _ = pack_shared(root / f"level{r}.aotxrt", name=f"cs{r}", stream_name=f"CS{r}", subject_prefix=f"cs{r}.j")
    return rf


def _cpu(pids: list[int]) -> list[float]:
    return [cpu_seconds(p) for p in pids]


def level(args, cluster: EmbeddedCluster, root: Path, r: int) -> dict:
    """R runtimes on a fresh journal of the level's own: the clients' aggregate rate, their latency, and the
    CPU (in cores) of each runtime, of the nats nodes and of the clients over the measured seconds."""
    rf = level_file(root, r)
    names = [f"b{r}p{i}" for i in range(args.participants)]
    write_grants(root / f"grants{r}", {n: ALL for n in names}, CONFIG_SHA)
    stats = [root / f"stats{r}-{i}.json" for i in range(r)]
    runtimes = [start_runtime(rf, root / f"grants{r}", cluster, root / f"boot{r}-{i}.log", stats[i]) for i in range(r)]
    try:
        start_at = time.time() + 3.0 + 0.05 * args.participants
        clients = start_clients(args, rf, cluster, names, start_at)
        nats_pids = [n.pid for n in cluster.nodes if n.pid]
        groups = {"runtimes": [p.pid for p in runtimes], "nats": nats_pids, "clients": [c.pid for c in clients]}
        results = []
        try:
            time.sleep(max(0.0, start_at - time.time()))
            before = {k: _cpu(v) for k, v in groups.items()}
            main_before = [main_thread_cpu(p.pid) or 0.0 for p in runtimes]
            stats_before = [round_stats.read(f) for f in stats]
            time.sleep(args.seconds)
            used = {k: [(b - a) / args.seconds for a, b in zip(before[k], _cpu(v))] for k, v in groups.items()}
            used["runtime_main"] = [((main_thread_cpu(p.pid) or 0.0) - a) / args.seconds
                                    for p, a in zip(runtimes, main_before)]
            time.sleep(2 * round_stats.WRITE_EVERY)   # the window's last counters written (the clients stopped)
            stats_after = [round_stats.read(f) for f in stats]
            used["inside"] = inside_rows(stats_before, stats_after, args.seconds)
            for c in clients:
                out, _ = c.communicate(timeout=300 + args.seconds)
                if c.returncode != 0:
                    for i in range(r):   # what the runtimes said
                        sys.stderr.write(f"--- runtime {i}:\n{(root / f'boot{r}-{i}.log').read_text()[-3000:]}\n")
                    raise RuntimeError(f"a client process failed (exit {c.returncode}); see its traceback above")
                results.append(json.loads(out))
        finally:
            for c in clients:
                if c.poll() is None:
                    c.kill()
        lat = sorted(x for res in results for x in res["latencies"])
        return {"rate": sum(x["done"] for x in results) / args.seconds,
                "p50_ms": 1e3 * lat[len(lat) // 2] if lat else 0.0,
                "p99_ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else 0.0, **used}
    finally:
        for p in runtimes:
            p.terminate()
        for p in runtimes:
            p.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.cluster_scale")
    ap.add_argument("--runtimes", default="1,2,3")
    ap.add_argument("--participants", type=int, default=48)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--client-procs", type=int, default=4)
    ap.add_argument("--retire-every", type=int, default=RETIRE_EVERY,
                    help="every participant's Nth mutation retires its receipts (participants × N must fit the table)")
    ap.add_argument("--client", help=argparse.SUPPRESS)   # (a client process of the bench)
    args = ap.parse_args(argv)
    if args.client:
        print(json.dumps(asyncio.run(client(json.loads(args.client)))))
        return 0
    levels = [int(x) for x in args.runtimes.split(",")]
    receipts = Capacities().receipts
    if args.participants * args.retire_every > receipts:   # decide would refuse them (507) before the level ends
        ap.error(f"--participants {args.participants} × {args.retire_every} receipts each do not fit the "
                 f"{receipts}-receipt table; at most {receipts // args.retire_every}")
    with tempfile.TemporaryDirectory(prefix="aotx-cluster-bench-") as tmp:
        root = Path(tmp)
        with EmbeddedCluster(root / "cluster") as cluster:   # its one unrestricted user (a bench, not a deployment)
            ceiling = asyncio.run(raw_ceiling(cluster, args.participants, args.seconds))
            print(f"[cluster_scale] raw guarded publishes, {args.participants} in flight: {ceiling:,.0f}/s",
                  file=sys.stderr, flush=True)
            rows = []
            for r in levels:
                out = level(args, cluster, root, r)
                rows.append((r, out))
                print(f"[cluster_scale] {r} runtime(s): {out['rate']:,.0f} mutations/s", file=sys.stderr, flush=True)
    base = rows[0][1]["rate"] if rows else 1.0
    knobs = ", ".join(f"{k}={os.environ[k]}" for k in ("AOTX_FOLLOW_WAIT", "AOTX_COMMAND_PIPELINE") if k in os.environ)
    print(f"\n## shared mutations/s on a 3-node cluster ({args.participants} participants, "
          f"{args.client_procs} client processes, {args.seconds:g} s per level{'; ' + knobs if knobs else ''})\n")
    print("| runtimes | mutations/s | vs 1 runtime | vs raw guarded publish |")
    print("|---:|---:|---:|---:|")
    print(f"| raw | {ceiling:,.0f} | | 1.00× |")
    for r, out in rows:
        print(f"| {r} | {out['rate']:,.0f} | {out['rate'] / base:.2f}× | {out['rate'] / ceiling:.2f}× |")
    print("\nWhat bounded each level (CPU in cores over the measured seconds; retire every "
          f"{args.retire_every}):\n")
    print("| runtimes | mutation p50 / p99 ms | each runtime's CPU | nats nodes' CPU (sum) | clients' CPU (sum) |")
    print("|---:|---:|---|---:|---:|")
    for r, out in rows:
        each = " ".join(f"{x:.2f}" for x in out["runtimes"])
        print(f"| {r} | {out['p50_ms']:.1f} / {out['p99_ms']:.1f} | {each} | {sum(out['nats']):.2f} | "
              f"{sum(out['clients']):.2f} |")
    print("\n" + inside_table([(r, out["inside"], out["runtime_main"]) for r, out in rows]))
    print("\n" + cpu_split([(r, out["rate"], sum(out["runtimes"])) for r, out in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
