"""One run, one table: the kernels' tok/s at a batch next to the engine's and the HTTP server's
at the same number of concurrent streaming chats, with the ratios (issue 12, part 5).

    python3 -m ops.gpu.serving_report [--backend cuda] [--streams 1,16,64,256] [--max-tokens 256]
                                      [--loops behind,classic] [--http-loops behind,classic] [--out DIR]
                                      [--http-workers 1,8] [--clients K]

Per stream count: kernel bench (ops.gpu.bench's generate loop: a 32-token prompt, then every step
forward + sample, ids back each step), the engine in process (ops.gpu.engine_bench) and `aotx serve`
over HTTP (ops.gpu.serve_bench; one server per loop, --max-batch the largest stream count): aggregate
tok/s, TTFT p50/p99, ITL p50/p99, device-busy share, decode batch mean/max, and HTTP ÷ kernels,
engine ÷ kernels. `--http-workers 1,8`: one HTTP server per worker count (`aotx serve --http-workers N`),
with the server's CPU µs per streamed token (main process, HTTP workers, nats-server); `--clients K`
spreads each HTTP load over K client processes (one Python client cannot read 30k tok/s). Writes serving_report.json and serving_report.md under --out (default $OUT, else
var/serving-report). On the CPU: `--backend numpy --streams 1,16 --max-tokens 64` (or tiny sizes
for a smoke run).
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

import numpy as np

from ops.gpu import engine_bench, serve_bench

os.environ.setdefault("OPENBLAS_NUM_THREADS", "8")
OVERLAP_FLAG = {"behind": "on", "classic": "off"}


def kernel_tok_s(backend, vocab: int, batch: int, new: int) -> float:
    from ops.gpu.bench import PROMPT_LEN, ours_generate

    prompts = np.random.default_rng(batch).integers(3, vocab, (batch, PROMPT_LEN)).astype(np.int32)
    ours_generate(backend, prompts, min(8, new))            # warm-up: this bucket's graphs
    dt, _ = ours_generate(backend, prompts, new)
    return batch * new / dt


def http_runs(args, streams: list[int], loop: str, workers: int = 1) -> dict[int, dict]:
    out = {}
    with tempfile.TemporaryDirectory(prefix="aotx-serving-report-") as var:
        proc, base = serve_bench.start_server(args.backend, max(streams), args.max_tokens, var, OVERLAP_FLAG[loop],
                                              http_workers=workers)
        try:
            for n in streams:
                out[n] = asyncio.run(serve_bench.load(base, n, args.max_tokens, args.temperature,
                                                      clients=args.clients, server_pid=proc.pid))
                print(f"http   {loop:<7} w{workers} {n:>3} streams: {out[n]['tok_s']:,.0f} tok/s, server CPU "
                      f"{out[n]['cpu_us_per_token_all']:.0f} µs/token", flush=True)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return out


def _f(v, spec=",.0f"):
    return "—" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def _cpu(r: dict) -> str:
    if "cpu_us_per_token_main" not in r:
        return ""
    return " / ".join(_f(r[f"cpu_us_per_token_{k}"]) for k in ("main", "workers", "nats"))


def markdown(doc: dict) -> str:
    lines = [f"## Serving report: {doc['device']}, {doc['backend']}, {doc['date']}, commit {doc['commit']}", "",
             f"`{doc['command']}`; {doc['max_tokens']} new tokens per stream"
             f"{' (ignore_eos: every stream runs to it)' if doc.get('ignore_eos') else ' at most (a stream ends at EOS)'}"
             f", temperature {doc['temperature']}.", "",
             "| streams | surface | loop | tok/s | ÷ kernels | TTFT p50 / p99 ms | ITL p50 / p99 ms | device busy "
             "| decode batch mean / max | server CPU µs/token main / workers / nats |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n, row in doc["rows"].items():
        k = row["kernels_tok_s"]
        lines.append(f"| {n} | kernel bench | — | {_f(k)} | 1.00 | | | | {n} | |")
        for surface in ("engine", "http"):
            for loop, r in row[surface].items():
                lines.append(f"| {n} | {surface} | {loop} | {_f(r['tok_s'])} | {_f(r['tok_s'] / k if k else None, '.2f')} "
                             f"| {_f(r['ttft_p50_ms'], '.1f')} / {_f(r['ttft_p99_ms'], '.1f')} "
                             f"| {_f(r['itl_p50_ms'], '.2f')} / {_f(r['itl_p99_ms'], '.2f')} "
                             f"| {_f(r['device_busy_share'], '.0%')} "
                             f"| {_f(r['mean_decode_batch'], '.0f')} / {r['max_decode_batch']} "
                             f"| {_cpu(r)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--streams", default="1,16,64,256")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--loops", default="behind,classic", help="engine loops in process")
    ap.add_argument("--http-loops", default="behind,classic", help="engine loops of the HTTP servers ('' = none)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "var/serving-report")
    ap.add_argument("--http-workers", default="1", help="aotx serve --http-workers of each HTTP server, e.g. 1,8")
    ap.add_argument("--clients", type=int, default=1, help="client processes each HTTP load is spread over")
    ap.add_argument("--ignore-eos", action="store_true",
                    help="every stream runs to --max-tokens (vLLM's switch): the decode batch stays as wide as the "
                         "kernel bench's")
    args = ap.parse_args(argv)
    from ops.gpu.latency import set_ignore_eos
    set_ignore_eos(args.ignore_eos)
    streams = [int(x) for x in args.streams.split(",")]
    from kernels import create_backend, load_model_cached

    t0 = time.time()
    bundle = load_model_cached(progress=False)   # read-only here; in the test suite, the worker's loaded model
    backend = create_backend(args.backend, bundle, num_pages=engine_bench.pages_for(max(streams), args.max_tokens),
                             page_size=engine_bench.PAGE)
    device = getattr(getattr(backend, "dev", None), "name", None) or f"CPU ({os.cpu_count()} cores)"
    rows: dict[int, dict] = {}
    for n in streams:
        k = kernel_tok_s(backend, bundle.config.vocab_size, n, args.max_tokens)
        print(f"kernel         {n:>3} streams: {k:,.0f} tok/s", flush=True)
        rows[n] = {"kernels_tok_s": k, "engine": {}, "http": {}}
        for loop in [x for x in args.loops.split(",") if x]:
            r = asyncio.run(engine_bench.run_engine(bundle, backend, n, args.max_tokens, args.temperature, loop))
            rows[n]["engine"][loop] = r
            print(engine_bench.line(r), flush=True)
    del backend
    workers = [int(x) for x in args.http_workers.split(",") if x]
    for loop in [x for x in args.http_loops.split(",") if x]:
        for w in workers:
            label = loop if workers == [1] else f"{loop}, {w} HTTP worker{'s' if w > 1 else ''}"
            for n, r in http_runs(args, streams, loop, w).items():
                rows[n]["http"][label] = r
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"device": device, "backend": args.backend, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "commit": commit or "unknown", "command": "python3 -m ops.gpu.serving_report " + " ".join(argv or sys.argv[1:]),
           "max_tokens": args.max_tokens, "temperature": args.temperature, "ignore_eos": bool(args.ignore_eos),
           "load_average": os.getloadavg(),
           "seconds": time.time() - t0, "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "serving_report.json").write_text(json.dumps(doc, indent=1, default=float))
    (out / "serving_report.md").write_text(markdown(doc))
    print("\n" + markdown(doc), flush=True)
    print(f"written {out / 'serving_report.json'} and {out / 'serving_report.md'} in {doc['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
