"""Instructions (or system calls) of the server process per shared mutation POST, counted, and its CPU timed
(a benchmark, not a test).

    python -m ops.bench.shared_post_count [--requests 100,600] [--stub] [--clients 1] [--syscalls]
    python -m ops.bench.shared_post_count --serve 8000 --clients 8 [--stub]     (timed, no tool)

The figure the noisy 2-core box cannot blur: for each count N of `--requests`, one server process runs under
`valgrind --tool=callgrind` (`--syscalls`: `strace -c`, its main thread) — an embedded nats-server, a
SharedRuntime and `attach_shared` on a Quart app served by api.server (uvicorn + httptools on uvloop), as
`aotx serve` serves it. Once it serves, it starts `--clients` client processes (exec'd, so the tool does not
follow them; each makes its own requests, then waits for the go) that POST N set-member mutations in all
(every 64th a retirement; every one must answer 201) on keep-alive connections; then it stops. The two runs'
difference ÷ the difference of their N is the cost of one request: boot, shutdown and the load's setup
cancel. With one client the requests come one at a time (one journal append a mutation), so the count does
not depend on how fast the box is. `--stub`: a runtime that answers a fixed receipt at once (no journal):
the HTTP half alone.

`--serve N` alone runs the server once, without a tool, and prints the rate from the go to the last answer
and the server process's CPU µs a request (user + kernel, os.times) in that window.
`--client PLAN PORT` (internal) is a client.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VALGRIND = ["valgrind", "--tool=callgrind", "--dump-instr=no", "--collect-jumps=no"]


def _client(plan_file: str, port: int) -> int:
    """POST this client's requests (made here from the plan, so the server process does not count their
    making) one at a time on one keep-alive connection; each must answer 201."""
    from ops.bench.mutations import Load, http_jobs

    plan = json.loads(Path(plan_file).read_text())
    load = Load(0)
    load.names, load.seq, load.space, load.pid = plan["names"], plan["seq"], plan["space"], plan["pid"]
    jobs = http_jobs(load, plan["tokens"], plan["client"], plan["count"])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.connect()
    print("ready", flush=True)   # then all the clients start together, when the server says go
    sys.stdin.read(1)
    for path, body, headers in jobs:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        if r.status != 201:
            print(f"{path}: {r.status} {data[:300]!r}", file=sys.stderr)
            return 1
    conn.close()
    return 0


class _Stub:
    """A runtime that answers every mutation with one fixed receipt (ops.bench.shared_app_cost's)."""
    started = True

    def __init__(self) -> None:
        from ops.bench.shared_app_cost import RECEIPT
        self.receipt = RECEIPT

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def submit(self, actor, mutation):
        from aotx.runtime import Outcome
        return Outcome(201, self.receipt)


def stub_load(clients: int):
    """ops.bench.mutations' Load for `clients`, each participant given a space and an id of its own (for _Stub)."""
    from ops.bench.mutations import Load
    load = Load(clients)
    for name in load.names:
        load.space[name] = f"spc-{'1' * 32}-{secrets.token_hex(16)}"
        load.pid[name] = f"par-{'2' * 32}-{secrets.token_hex(16)}"
    return load


@contextlib.asynccontextmanager
async def shared_server(runtime, load):
    """The shared routes (api.server, `attach_shared`) over `runtime` on a loopback port, a bearer token a
    participant of `load`: yields (app, tokens by name, port); stopped on the way out."""
    from quart import Quart

    from api.server import serve_app
    from api.shared import attach_shared, token_sha256
    from ops.bench.mutations import ALL

    tokens = {name: secrets.token_hex(16) for name in load.names}
    app = Quart("bench")
    attach_shared(app, runtime, {token_sha256(t): (name, ALL) for name, t in tokens.items()}, media_url="")
    stop, ready, port = asyncio.Event(), asyncio.Event(), []
    serving = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop,
                                            on_ready=lambda h, p: (port.append(p), ready.set())))
    await ready.wait()
    try:
        yield app, tokens, port[0]
    finally:
        stop.set()
        await serving


async def _serve(n: int, clients: int, stub: bool, tmp: Path) -> None:
    from aotx.runtime import SharedRuntime
    from aotx.state import Capacities
    from eventlog import EmbeddedNats, StreamSpec
    from ops.bench.mutations import Load, prepared_load

    async def run(runtime, load: Load) -> None:
        async with shared_server(runtime, load) as (app, tokens, port):
            procs = []
            for c in range(clients):
                plan = {"names": load.names, "seq": load.seq, "space": load.space, "pid": load.pid, "tokens": tokens,
                        "client": c, "count": n // clients}
                (tmp / f"jobs{c}.json").write_text(json.dumps(plan))
                procs.append(await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "ops.bench.shared_post_count", "--client", str(tmp / f"jobs{c}.json"),
                    str(port), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE))
            for p in procs:   # each has made its requests and connected
                await p.stdout.readline()
            t0, cpu0 = time.perf_counter(), os.times()
            for p in procs:
                p.stdin.write(b"g")
                await p.stdin.drain()
            codes = [await p.wait() for p in procs]
            wall, cpu1 = time.perf_counter() - t0, os.times()
            user, system = cpu1.user - cpu0.user, cpu1.system - cpu0.system
            if any(codes):
                raise RuntimeError(f"a client failed: {codes}")
            served = app.extensions["aotx_shared"]["fast"].served
            print(f"served {served} of {n // clients * clients} on the fast path "
                  f"({n // clients * clients / wall:.0f}/s; server CPU "
                  f"{(user + system) / n * 1e6:.0f} µs a request, kernel {system / n * 1e6:.0f})", file=sys.stderr)

    if stub:
        await run(_Stub(), stub_load(max(clients, 2)))
        return
    async with EmbeddedNats(tmp / "nats") as server:
        runtime = SharedRuntime(server.url, StreamSpec(name="BENCH", subject_prefix="bench.j"),
                                Capacities(participants=64), progress=False, nats_auth=server.auth())
        await runtime.start()
        load = await prepared_load(runtime, max(clients, 2))   # one client alone sets another's rights
        await run(runtime, load)
        await runtime.stop()


def _count(n: int, args, out_dir: Path) -> int:
    out = out_dir / f"{'strace' if args.syscalls else 'callgrind'}.{n}.out"
    tool = (["strace", "-c", "-o", str(out)] if args.syscalls
            else VALGRIND + [f"--callgrind-out-file={out}"])
    cmd = tool + [sys.executable, "-m", "ops.bench.shared_post_count", "--serve", str(n), "--clients",
                  str(args.clients)] + (["--stub"] if args.stub else [])
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"the server under {tool[0]} failed ({done.returncode})")
    text = out.read_text()
    m = re.search(r"^\s*100\.00\s+\S+\s+\S+\s+(\d+)", text, re.M) if args.syscalls \
        else re.search(r"^summary:\s*(\d+)", text, re.M)
    if m is None:
        raise SystemExit(f"no total in {out}")
    served = re.findall(r"served \d+ of \d+ on the fast path", done.stderr)
    what = "system calls (the main thread)" if args.syscalls else "instructions"
    print(f"  {n:6d} requests: {int(m.group(1)):,} {what}  ({served[-1] if served else '?'})", flush=True)
    if args.syscalls:
        by_call = {c: int(k) for k, c in re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$",
                                                      text, re.M)}
        args.by_call.append(by_call)
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.shared_post_count")
    ap.add_argument("--requests", default="100,600", help="two request counts (the difference is counted)")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--stub", action="store_true", help="a runtime that answers at once: the HTTP half alone")
    ap.add_argument("--syscalls", action="store_true", help="count system calls (strace -c) instead of instructions")
    ap.add_argument("--keep", default=None, help="keep the callgrind files in this folder")
    ap.add_argument("--serve", type=int, default=None, help="run the server once for N requests (timed)")
    ap.add_argument("--client", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client is not None:
        return _client(args.client[0], int(args.client[1]))
    if args.serve is not None:
        from api.server import run_serving
        with tempfile.TemporaryDirectory(prefix="aotx-count-") as tmp:
            run_serving(_serve(args.serve, args.clients, args.stub, Path(tmp)))
        return 0
    lo, hi = (int(x) for x in args.requests.split(","))
    with tempfile.TemporaryDirectory(prefix="aotx-count-") as tmp:
        out_dir = Path(args.keep) if args.keep else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        tool = "strace" if args.syscalls else "callgrind"
        print(f"server process under {tool}, {args.clients} client(s), {'stub runtime' if args.stub else 'SharedRuntime'}",
              flush=True)
        args.by_call = []
        a, b = _count(lo, args, out_dir), _count(hi, args, out_dir)
    print(f"per request: {(b - a) / (hi - lo):,.{2 if args.syscalls else 0}f} "
          f"{'system calls' if args.syscalls else 'instructions'}", flush=True)
    if args.syscalls:
        first, second = args.by_call
        print("  by call: " + ", ".join(f"{c} {(second.get(c, 0) - first.get(c, 0)) / (hi - lo):.2f}"
                                          for c in sorted(second, key=lambda c: first.get(c, 0) - second[c])
                                          if second.get(c, 0) != first.get(c, 0)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
