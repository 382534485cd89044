"""The main process's CPU per streamed token of `aotx serve` over HTTP, over the paced stand-in backend
(a benchmark tool, not a test): the real engine, scheduler, detokenizer, event loop, HTTP workers and
NATS, the forward a sleep of `--step-ms` (ops.bench.paced_serve), the load from ops.gpu.serve_bench
(streaming chats with ignore_eos, spread over `--clients` processes).

    python -m ops.bench.paced_http [--trees A,B] [--workers 1,8] [--streams 64] [--step-ms 2]
                                   [--tokens 512] [--clients 2] [--rounds 2]

`--trees`: source trees (their roots) whose server is measured, alternated round by round in one run
(PYTHONPATH of the server process), so a change is read as a ratio against its peer under the same load.
Prints per run: client tok/s, ITL p50/p99, mean decode batch, and server CPU µs per streamed token: the
main process (all threads), its event loop thread alone, the rest of it (the engine thread and helpers),
the HTTP workers and nats-server; the box's load average beside each line.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile

from ops.gpu import serve_bench
from ops.gpu.latency import set_ignore_eos
from ops.proc_cpu import main_thread_cpu

_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each live thread of `pid`, by thread id (schedstat: nanoseconds)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError):
            pass
    return out


def _valgrind_python(var: str, out: str) -> str:
    """A python that runs under callgrind, instructions counted only while switched on (callgrind_control)."""
    path = os.path.join(var, "callgrind-python")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes "
                f"--callgrind-out-file={out} {sys.executable} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def measure(tree: str, workers: int, streams: int, step_ms: float, tokens: int, clients: int,
            callgrind: bool = False) -> dict:
    env_before, exe = os.environ.get("PYTHONPATH"), sys.executable
    os.environ["PYTHONPATH"] = tree    # the server process (and its workers) run this tree's code
    read_cpu = serve_bench.server_cpu
    try:
        with tempfile.TemporaryDirectory(prefix="aotx-paced-http-") as var:
            out = os.path.join(var, "callgrind.out")
            if callgrind:   # the main process only (its workers and nats-server are not traced)
                sys.executable = _valgrind_python(var, out)
                marks = []

                def switching_cpu(pid: int) -> dict:   # load() reads it right before and after the streams
                    got = read_cpu(pid)
                    subprocess.run(["callgrind_control", "-i", "off" if marks else "on", str(pid)],
                                   capture_output=True, check=True)
                    marks.append(got)
                    return got
                serve_bench.server_cpu = switching_cpu
            here = os.getcwd()
            os.chdir(tree)   # `python -m` puts its working directory first on sys.path, before PYTHONPATH
            try:
                proc, base = serve_bench.start_server(
                    "numpy", streams, tokens, var, "on", http_workers=workers,
                    entry=("-m", "ops.bench.paced_serve", "--step-ms", str(step_ms)))
            finally:
                sys.executable = exe
                os.chdir(here)
            try:
                loop0, th0 = main_thread_cpu(proc.pid) or 0.0, thread_cpu(proc.pid)
                res = asyncio.run(serve_bench.load(base, streams, tokens, 0.7, clients=clients, server_pid=proc.pid))
                loop1, th1 = main_thread_cpu(proc.pid) or 0.0, thread_cpu(proc.pid)
            finally:
                proc.terminate()
                proc.wait(300)
            if callgrind:
                from ops.bench.engine_host_step import _thread_ir
                per_thread = _thread_ir(out)
                res["ir_per_token"] = {k: v / max(res["tokens"], 1) for k, v in sorted(per_thread.items())}
                keep = os.environ.get("AOTX_PACED_HTTP_KEEP")   # a folder for the callgrind files (callgrind_annotate)
                if keep:
                    import shutil
                    for name in os.listdir(var):
                        if name.startswith("callgrind.out"):
                            shutil.copy(os.path.join(var, name), os.path.join(keep, f"{workers}w-{name}"))
    finally:
        serve_bench.server_cpu = read_cpu
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    # the loop thread's figure includes the warm-up requests (small next to the measured streams)
    res["cpu_us_per_token_loop"] = (loop1 - loop0) / max(res["tokens"], 1) * 1e6
    spent = sorted(((th1[t] - th0.get(t, 0.0)) / max(res["tokens"], 1) * 1e6 for t in th1 if t != proc.pid),
                   reverse=True)
    res["threads"] = [round(x, 1) for x in spent[:3]]   # the main process's busiest other threads
    return res


def line(tree: str, workers: int, streams: int, r: dict) -> str:
    load = open("/proc/loadavg").read().split()[0]
    return (f"{tree:<22} w{workers:<2} {streams:>3} streams: {r['tok_s']:>8,.0f} tok/s  ITL p50/p99 "
            f"{r['itl_p50_ms']:.2f}/{r['itl_p99_ms']:.2f} ms  batch {r['mean_decode_batch']:.0f}  µs/token main "
            f"{r['cpu_us_per_token_main']:.1f} (loop≈{r['cpu_us_per_token_loop']:.1f}, rest "
            f"{r['cpu_us_per_token_main'] - r['cpu_us_per_token_loop']:.1f}) workers {r['cpu_us_per_token_workers']:.1f}"
            f" nats {r['cpu_us_per_token_nats']:.1f}  other threads {r['threads']}  load {load}"
            + ("" if "ir_per_token" not in r else "\n    callgrind, main process, instructions per token: all "
               f"{sum(r['ir_per_token'].values()):,.0f}; by thread (1: event loop) "
               + ", ".join(f"{k}: {v:,.0f}" for k, v in r["ir_per_token"].items() if v >= 50)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default=os.getcwd(), help="source tree roots, alternated (comma-separated)")
    ap.add_argument("--workers", default="1,8")
    ap.add_argument("--streams", default="64")
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--callgrind", action="store_true",
                    help="run the server's main process under callgrind: its instructions per streamed token, by "
                         "thread, counted over the streams only (the CPU figures are then callgrind's, ~50x)")
    args = ap.parse_args(argv)
    set_ignore_eos(True)
    trees = [t for t in args.trees.split(",") if t]
    for rnd in range(args.rounds):
        for streams in (int(s) for s in args.streams.split(",")):
            for workers in (int(w) for w in args.workers.split(",")):
                for tree in (trees if rnd % 2 == 0 else trees[::-1]):
                    r = measure(tree, workers, streams, args.step_ms, args.tokens, args.clients, args.callgrind)
                    print(line(tree, workers, streams, r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
