"""Server CPU per shared mutation POST: the ASGI fast path (api.shared.fast) against the Quart route, in one
run (a benchmark, not a test).

    python -m ops.bench.shared_post_cost [--clients 8] [--requests 300] [--rounds 2] [--sample]

A server process (spawned): an embedded nats-server (file storage, sync_interval always), a SharedRuntime
and `attach_shared` on a Quart app served by api.server (uvicorn + httptools) on uvloop, as `aotx serve`
serves it; `--clients` client processes (ops.bench.http_clients: one keep-alive http.client connection
each) POST `--requests` set-member mutations each (every 64th a retirement), every one admitted (201).
Rounds alternate fast path on / off (the same server, its switch flipped between rounds) and `runtime`:
the same load submitted inside the server process (8 coroutines, `submit_body`, no HTTP), the peer that
says what HTTP adds. Prints per round
requests/s, the server process's CPU µs a request (all its threads, from /proc: HTTP + runtime + NATS
client; the kernel's part of it), how many mutations the journal writer's appends carried on average
(its group commit: fewer a round costs more a mutation), the nats-server's CPU, the load; then the medians and the fast path's ratio to Quart's.
`--sample`: the server's main thread sampled on a CPU-time timer (ITIMER_PROF, as ops.bench.mutation_profile;
the kernel ticks every ~4 ms here); each sample counted once for the package of its innermost Python frame
("self") and once for every package on its stack ("incl."); shares are of the samples of that mode.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ops.bench.http_clients import post_all
from ops.bench.mutations import ALL, http_jobs, prepared_load
from ops.proc_cpu import children, comm, cpu_seconds


def _package(filename: str) -> str:
    """`site-packages/uvicorn/…` → uvicorn; our `aotx/runtime/…` → aotx/runtime; the standard library's
    `asyncio/…` → asyncio."""
    parts = filename.replace("\\", "/").split("/")
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    for top in ("aotx", "api", "eventlog", "ops"):
        if top in parts:
            i = len(parts) - 1 - parts[::-1].index(top)
            return "/".join(parts[i:i + 2]).removesuffix(".py")
    return parts[-2] if len(parts) > 1 and parts[-2] != "python3.11" else parts[-1].removesuffix(".py")


class _Sampler:
    MODES = ("fast", "quart", "runtime")

    def __init__(self) -> None:
        import collections
        import signal
        self.mode = "fast"   # the round running (set by the server's command loop)
        self.self_, self.incl, self.funcs = ({m: collections.Counter() for m in self.MODES} for _ in range(3))
        self.n = collections.Counter()
        signal.signal(signal.SIGPROF, self._tick)
        signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)

    def _tick(self, _sig, frame) -> None:
        mode = self.mode
        self.n[mode] += 1
        seen = set()
        leaf = True
        while frame is not None:
            pkg = _package(frame.f_code.co_filename)
            if leaf:
                self.self_[mode][pkg] += 1
                self.funcs[mode][f"{pkg}:{frame.f_code.co_name}"] += 1
                leaf = False
            if pkg not in seen:
                seen.add(pkg)
                self.incl[mode][pkg] += 1
            frame = frame.f_back

    def report(self) -> None:
        import signal
        signal.setitimer(signal.ITIMER_PROF, 0)
        for mode in self.MODES:
            n = self.n[mode] or 1
            top = sorted(set(self.self_[mode]) | set(self.incl[mode]), key=lambda k: -self.incl[mode][k])[:18]
            print(f"\nsamples, {mode} rounds ({self.n[mode]}): package  self %  incl. %")
            for k in top:
                print(f"  {k:<24} {100 * self.self_[mode][k] / n:5.1f}  {100 * self.incl[mode][k] / n:5.1f}")
            print("  functions (self %): " + ", ".join(f"{k} {100 * v / n:.1f}"
                                                     for k, v in self.funcs[mode].most_common(30)))


async def _serve_async(conn, clients: int, sample: bool = False) -> None:
    from quart import Quart

    from api.server import serve_app
    from api.shared import attach_shared, token_sha256
    from aotx.runtime import SharedRuntime
    from aotx.state import Capacities
    from eventlog import EmbeddedNats, StreamSpec

    with tempfile.TemporaryDirectory(prefix="aotx-bench-") as tmp:
        async with EmbeddedNats(Path(tmp) / "nats") as server:
            runtime = SharedRuntime(server.url, StreamSpec(name="BENCH", subject_prefix="bench.j"),
                                    Capacities(participants=64), progress=False, nats_auth=server.auth())
            await runtime.start()
            load = await prepared_load(runtime, clients)
            tokens = {name: secrets.token_hex(16) for name in load.names}
            app = Quart("bench")
            attach_shared(app, runtime, {token_sha256(t): (name, ALL) for name, t in tokens.items()})
            fast = app.extensions["aotx_shared"]["fast"]
            stop, ready, port = asyncio.Event(), asyncio.Event(), []
            serving = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop,
                                                    on_ready=lambda h, p: (port.append(p), ready.set())))
            await ready.wait()
            conn.send((port[0], load, tokens))
            loop = asyncio.get_running_loop()
            sampler = _Sampler() if sample else None
            while (cmd := await loop.run_in_executor(None, conn.recv)) is not None:
                if sampler is not None:
                    sampler.mode = "runtime" if not isinstance(cmd, bool) else "fast" if cmd else "quart"
                if isinstance(cmd, bool):
                    fast.on = cmd
                    conn.send((fast.served, _appends(runtime)))
                else:   # ("runtime", the client's sequences, requests a client): the same load, no HTTP
                    load.seq = cmd[1]
                    before = _appends(runtime)
                    wall, cpu = await _in_process(runtime, load, clients, cmd[2])
                    conn.send((wall, cpu, load.seq, before, _appends(runtime)))
            if sampler is not None:
                sampler.report()
            stop.set()
            await serving
            await runtime.stop()


def _appends(runtime) -> float:
    """Appends (single or atomic batches) the runtime's journal writer has had acknowledged."""
    return sum(sample.value for sample in runtime.writer.metrics.ack_metric().samples
               if sample.name.endswith("_count"))


async def _in_process(runtime, load, clients: int, per_client: int) -> tuple[float, float]:
    """`per_client` mutations from each of `clients` coroutines through `submit_body` (bodies made
    beforehand): (wall seconds, this process's CPU seconds)."""
    from aotx.runtime import submit_body
    from aotx.state import Grants, MutationKind
    from aotx.state.rights import Actor

    work = []
    for c in range(clients):
        todo = []
        for i in range(per_client):
            name, raw, space = load.next_member(c, i)
            todo.append((Actor(name, Grants.all()), MutationKind.SET_MEMBER if space else MutationKind.RETIRE,
                         raw, space))
            load.seq[name] += 1
        work.append(todo)

    async def client(todo) -> None:
        for who, kind, raw, space in todo:
            out = await submit_body(runtime, who, kind, raw, space)
            if out.status != 201:
                raise RuntimeError(f"{kind}: {out.status} {out.body}")

    before, t0 = cpu_seconds(os.getpid()), time.perf_counter()
    await asyncio.gather(*(client(todo) for todo in work))
    return time.perf_counter() - t0, cpu_seconds(os.getpid()) - before


def _serve(conn, clients: int, sample: bool) -> None:
    from api.server import run_serving
    run_serving(_serve_async(conn, clients, sample))


def _sys_seconds(pid: int) -> float:
    """The process's system (kernel) CPU seconds: stime, field 15 of /proc/PID/stat."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[12]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _nats_pids(pid: int) -> list[int]:
    return [c for c in children(pid) if comm(c).startswith("nats-server")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.shared_post_cost")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=300, help="per client and round")
    ap.add_argument("--rounds", type=int, default=2, help="pairs of rounds (fast, quart)")
    ap.add_argument("--sample", action="store_true", help="where the server's main thread spends its CPU")
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(there, args.clients, args.sample), daemon=True)
    proc.start()
    port, load, tokens = here.recv()
    nats = _nats_pids(proc.pid)
    n = args.clients * args.requests
    rows: dict[str, list[tuple[float, float, float]]] = {"fast": [], "quart": [], "runtime": []}
    print(f"{args.clients} client processes × {args.requests} set-member POSTs a round, {os.cpu_count()} cores",
          flush=True)
    try:
        for _ in range(args.rounds):
            for mode in ("fast", "quart", "runtime"):
                sys_before = _sys_seconds(proc.pid)
                before, nats_before = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in nats)
                if mode == "runtime":
                    here.send(("runtime", load.seq, args.requests))
                    wall, cpu, load.seq, a0, a1 = here.recv()
                else:
                    here.send(mode == "fast")
                    served, a0 = here.recv()
                    jobs = [http_jobs(load, tokens, c, args.requests) for c in range(args.clients)]
                    before, nats_before = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in nats)
                    wall, _ = asyncio.run(post_all(port, jobs))
                    cpu = cpu_seconds(proc.pid) - before
                    here.send(mode == "fast")
                    after, a1 = here.recv()
                    fast_answered = after - served
                    if fast_answered != (n if mode == "fast" else 0):
                        raise RuntimeError(f"{mode}: the fast path answered {fast_answered} of {n}")
                nats_cpu = sum(cpu_seconds(p) for p in nats) - nats_before
                kernel = _sys_seconds(proc.pid) - sys_before
                rows[mode].append((n / wall, cpu / n, nats_cpu / n))
                print(f"  {mode:<7} {n / wall:7.0f}/s  server {cpu / n * 1e6:6.0f} µs/request "
                      f"(kernel {kernel / n * 1e6:4.0f}, {n / max(a1 - a0, 1):.1f} mutations an append)  nats-server "
                      f"{nats_cpu / n * 1e6:5.0f} µs/request  load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        here.send(None)
        proc.join(30)
        if proc.is_alive():
            proc.terminate()
    med = {m: [statistics.median(r[i] for r in rows[m]) for i in range(3)] for m in rows}
    for m in rows:
        print(f"median {m:<6} {med[m][0]:7.0f}/s  server {med[m][1] * 1e6:6.0f} µs/request  "
              f"nats-server {med[m][2] * 1e6:5.0f} µs/request")
    fast, quart, alone = (med[m][1] for m in ("fast", "quart", "runtime"))
    print(f"fast ÷ quart: server CPU {fast / quart:.2f}×, rate {med['fast'][0] / med['quart'][0]:.2f}×; over the "
          f"runtime alone: fast +{(fast - alone) * 1e6:.0f} µs ({fast / alone:.2f}×), "
          f"quart +{(quart - alone) * 1e6:.0f} µs ({quart / alone:.2f}×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
