"""Benchmark (not a test): the CPU a runtime's follower spends on each message another runtime wrote,
against the writer's own CPU per mutation, in one run (issue 15 part 5: every runtime applies every
runtime's writes, so this ratio bounds how throughput grows with runtimes; docs/SCALE.md, "Part 5,
session 10").

    .venv/bin/python -m ops.bench.follow_cost [--participants 40] [--mutations 60] [--members] [--deployed]
                                              [--backlog] [--callgrind]

One embedded nats-server. A follower process (`SharedRuntime(follow=True)`, idle: it only applies what
it hears) and then a writer process (`SharedRuntime(follow=True)` in process, no RPC): `--participants`
lineages, each registering, creating a space and then `--mutations` conversations one after the other
(every 8th a retirement); with `--members`, member-rights changes instead of conversations (the
mutations of ops.bench.cluster_scale: each participant sets the rights of one other participant in its own
space, read and read+write in turn). Each process reports its CPU (all threads) over its work; the follower also
its aotx.runtime.round_stats counters (the wall µs of applying alone: above the CPU on a loaded box). Prints µs per message followed, per
mutation written, and their ratio (b/a in ops/bench/cluster_inside.py's terms, without the RPC a
deployed runtime adds to each own mutation).

`--deployed`: the follower runs as `aotx boot` runs a runtime: serving RPC (aotx.runtime.RuntimeRpcServer, whose
announcer is told what every applied message changed) and keeping snapshots every 2,000 messages (the default of
`--snapshot-every`), both per-message costs of a deployed runtime's follower.

`--backlog`: the follower process is stopped (SIGSTOP) while the writer writes and continued after, so it
applies the whole log as a backlog in runs of queued messages — a busy runtime's regime, where per-message
costs count and per-wake-up ones are amortized (without it a follower on an idle core wakes for nearly every
message; its CPU then is mostly wake-ups, reads and the event loop's).

`--callgrind`: the follower runs under `valgrind --tool=callgrind --instr-atstart=no`, its instructions
counted from the moment it is ready until it has applied the last message (not its start nor its exit), and
printed per message followed (deterministic up to scheduling: under valgrind the follower falls behind and
applies runs of queued messages, as a busy runtime does).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aotx.runtime import round_stats

SPEC = ("FOLLOWCOST", "followcost.j")


def _body(name: str, seq: int, **fields) -> bytes:
    from aotx.state import lineage_for
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": os.urandom(16).hex(), "sequence": str(seq), **fields}).encode()


async def _runtime(url: str, deployed: bool = False):
    from aotx.runtime import SharedRuntime
    from aotx.snapshot import DEFAULT_EVERY, SnapshotPolicy
    from eventlog import StreamSpec
    return await SharedRuntime(url, StreamSpec(name=SPEC[0], subject_prefix=SPEC[1]), progress=False, follow=True,
                               snapshots=SnapshotPolicy(every=DEFAULT_EVERY) if deployed else None).start()


async def _serve(rt, url: str):
    """An RPC server on the runtime, as `aotx boot` starts one (its announcer hears every applied message)."""
    import datetime as dt
    from pathlib import Path as _Path
    from aotx.runtime import GrantedRuntime, RuntimeRpcServer
    from aotx.runtime_file import GrantFile
    grants = GrantFile(_Path("unused"), dt.datetime.now(dt.timezone.utc), "be" * 32, {}, "00" * 32)
    return await RuntimeRpcServer(GrantedRuntime(rt, grants), url, "followcost").start()


async def writer(url: str, participants: int, mutations: int, members: bool = False) -> dict:
    from aotx.runtime import submit_body
    from aotx.state import Actor, Grants, MutationKind as M
    rt = await _runtime(url)
    c0 = time.process_time()
    ids: dict[int, str] = {}
    registered = asyncio.Event()

    async def one(i: int) -> None:
        name = f"w{i}"
        actor = Actor(name, Grants.all())
        out = await submit_body(rt, actor, M.REGISTER, _body(name, 1))
        assert out.status == 201, out.body
        ids[i] = out.body["resource"]
        if len(ids) == participants:
            registered.set()
        space = (await submit_body(rt, actor, M.CREATE_SPACE, _body(name, 2, scope="private"))).body["resource"]
        await registered.wait()
        other = ids[(i + 1) % participants]
        for seq in range(3, 3 + mutations):
            if seq % 8 == 0:
                kind, raw, where = M.RETIRE, _body(name, seq, retry_floor=str(seq)), None
            elif members:
                kind, where = M.SET_MEMBER, space
                raw = _body(name, seq, participant=other, permissions=["read"] if seq % 2 else ["read", "write"])
            else:
                kind, raw, where = M.CREATE_CONVERSATION, _body(name, seq), space
            out = await submit_body(rt, actor, kind, raw, where)
            assert out.status == 201, out.body
    await asyncio.gather(*(one(i) for i in range(participants)))
    cpu = time.process_time() - c0
    await rt.stop()
    return {"cpu": cpu, "mutations": participants * (mutations + 2)}


def _callgrind(on: bool) -> None:
    if os.environ.get(_UNDER_CALLGRIND):
        subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                       check=True, stdout=subprocess.DEVNULL)


_UNDER_CALLGRIND = "AOTX_FOLLOW_COST_CALLGRIND"


def _totals(path: str) -> int:
    """The instructions a callgrind output file counted (with --instr-atstart=no "summary:" says 0)."""
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("totals:"))


async def follower(url: str, ready: Path, done: Path, deployed: bool = False) -> dict:
    rt = await _runtime(url, deployed)
    server = await _serve(rt, url) if deployed else None
    _callgrind(True)
    ready.write_text("1")
    c0, a0 = time.process_time(), rt.writer.applied_seq()
    while not done.exists():
        await asyncio.sleep(0.05)
    end = int(done.read_text())
    while rt.writer.applied_seq() < end:   # (the writer is gone: what is left arrives or is applied now)
        await asyncio.sleep(0.01)
    cpu = time.process_time() - c0
    _callgrind(False)
    n = rt.writer.applied_seq() - a0
    if server is not None:
        await server.stop()
    await rt.stop()
    return {"cpu": cpu, "messages": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.follow_cost")
    ap.add_argument("--participants", type=int, default=40)
    ap.add_argument("--mutations", type=int, default=60)
    ap.add_argument("--members", action="store_true", help="member-rights changes instead of conversations")
    ap.add_argument("--deployed", action="store_true", help="the follower serves RPC and keeps snapshots (aotx boot)")
    ap.add_argument("--backlog", action="store_true", help="the follower is stopped while the writer writes")
    ap.add_argument("--callgrind", action="store_true", help="count the follower's instructions under callgrind")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "w":
        print(json.dumps(asyncio.run(writer(args.url, args.participants, args.mutations, args.members))))
        return 0
    if args.role == "f":
        ready, done = (Path(p) for p in args.files.split(","))
        print(json.dumps(asyncio.run(follower(args.url, ready, done, args.deployed))))
        return 0
    from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="aotx-follow-cost-") as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        url, root = server.client_url(), Path(tmp)
        ready, done, stats = root / "ready", root / "done", root / "stats.json"
        me = [sys.executable, "-m", "ops.bench.follow_cost", "--url", url]
        grind = Path(tempfile.gettempdir()) / f"callgrind.follow_cost.{os.getpid()}"   # (kept: callgrind_annotate it)
        under = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={grind}"] \
            if args.callgrind else []
        f = subprocess.Popen(under + me + ["--role", "f", "--files", f"{ready},{done}"] +
                             (["--deployed"] if args.deployed else []), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL if args.callgrind else None,
                             env={**env, round_stats.ENV: str(stats), **({_UNDER_CALLGRIND: "1"} if args.callgrind else {})})
        while not ready.exists():
            if f.poll() is not None:
                raise RuntimeError("the follower did not start")
            time.sleep(0.05)
        if args.backlog:
            os.kill(f.pid, signal.SIGSTOP)
        w = subprocess.run(me + ["--role", "w", "--participants", str(args.participants), "--mutations",
                                 str(args.mutations)] + (["--members"] if args.members else []),
                           stdout=subprocess.PIPE, env=env, check=True)
        wrote = json.loads(w.stdout)
        if args.backlog:
            os.kill(f.pid, signal.SIGCONT)

        async def end() -> int:
            rec = await JetStreamRecorder.connect(url, StreamSpec(name=SPEC[0], subject_prefix=SPEC[1]))
            try:
                return (await rec.stream_info()).last_seq
            finally:
                await rec.close()
        done.write_text(str(asyncio.run(end())))
        out, _ = f.communicate(timeout=1200 if args.callgrind else 120)
        followed, counters = json.loads(out), round_stats.read(stats)
        ir = _totals(str(grind)) if args.callgrind else 0
    a = wrote["cpu"] / wrote["mutations"]
    b = followed["cpu"] / max(1, followed["messages"])
    fed = counters.get("follow_fed_s", 0.0) / max(1.0, counters.get("follow_fed", 0.0))
    print(f"load {os.getloadavg()[0]:.2f}; {'members' if args.members else 'conversations'}"
          f"{'; deployed follower' if args.deployed else ''}{'; backlog' if args.backlog else ''}; writer: {wrote['mutations']:,} mutations, {1e6 * a:.0f} µs CPU each; "
          f"follower: {followed['messages']:,} messages, {1e6 * b:.0f} µs CPU each (applying them, wall: {1e6 * fed:.0f} µs); "
          f"followed ÷ written {b / a:.2f}")
    if args.callgrind:
        print(f"follower under callgrind: {ir:,} instructions from ready to the last message applied = "
              f"{ir / max(1, followed['messages']):,.0f} a message followed ({counters.get('follow_runs', 0):.0f} runs; {grind})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
