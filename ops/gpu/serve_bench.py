"""`aotx serve` over HTTP under N concurrent streaming chat requests (a benchmark, not a test):
aggregate tok/s, TTFT and inter-token latency p50/p99 as a client of the real gateway sees them,
and the server's device-busy share and decode batch width (/v1/stats deltas).

    python -m ops.gpu.serve_bench [--concurrency 64] [--max-tokens 256] [--backend cuda]
                                  [--engine-overlap on|off|auto]

Starts `aotx serve` (embedded NATS and all) on a free port with a temporary state directory,
warms it with a few requests, then sends `--concurrency` streaming `/v1/chat/completions`
requests at once (`stream_options.include_usage`, so the token count is the server's own),
timing every content chunk's arrival. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import httpx

from ops.gpu.latency import device_share, ignore_eos, set_ignore_eos, summarize
from ops.gpu.model_check import PROMPTS
from ops.gpu.serve_load import cpu_per_token, server_cpu, split_load
from ops.gpu.sse_client import StreamConn

READY = re.compile(r"serving \S+ on (http://\S+) ")


def start_server(backend: str, max_batch: int, max_tokens: int, var: str, overlap: str = "auto",
                 pages: int | None = None, http_workers: int = 1,
                 extra: tuple[str, ...] = (), entry: tuple[str, ...] = ("-m", "ops.cli")) -> tuple[subprocess.Popen, str]:
    pages = pages or max_batch * (-(-(128 + max_tokens) // 16)) + 64
    # a cProfile of the server's main thread, written at exit ($AOTX_SERVE_PROFILE_TIMER=thread: its own CPU)
    profile = os.environ.get("AOTX_SERVE_PROFILE")
    cmd = [sys.executable, *(["-m", "ops.bench.serve_profile", profile] if profile else []), *entry, "serve",
           "--port", "0", "--var", var, "--backend", backend, "--max-batch", str(max_batch), "--kv-pages", str(pages),
           "--engine-overlap", overlap, "--http-workers", str(http_workers), *extra]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 300
    assert proc.stderr is not None
    for line in proc.stderr:
        sys.stderr.write(line if "dequantize" not in line else "")
        m = READY.search(line)
        if m:
            return proc, m.group(1)
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError("aotx serve did not start")


_CONTENT = b'"delta":{"content":"'


def content_chunk(data: bytes) -> bool | None:
    """A plain content chunk read without json.loads (7-8 us of a client's ~19 a chunk): True when its
    content is not empty, False when it is; None for any chunk that must be parsed (no content delta,
    usage, an error). Exact for one choice: a quote inside a JSON string is escaped, so `"usage":{` and
    `"error"` can only be keys, and `"delta":{"content":"` only the start of the delta's content."""
    at = data.find(_CONTENT)
    if at < 0 or b'"usage":{' in data or b'"error"' in data:
        return None
    return data[at + len(_CONTENT):at + len(_CONTENT) + 1] != b'"'


async def one(conn: StreamConn, i: int, max_tokens: int, temperature: float) -> dict:
    """One streaming chat on `conn`: the arrival stamp of each content chunk, and the server's token count."""
    body = {"model": "smollm2-135m-instruct", "stream": True, "max_tokens": max_tokens,
            "temperature": temperature, "seed": i, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)] + " Answer in detail."}],
            **({"ignore_eos": True} if ignore_eos() else {})}
    stamps: list[float] = []
    usage: list[dict] = []

    def on_data(t: float, data: bytes) -> None:
        if data == b"[DONE]":
            return
        seen = content_chunk(data)
        if seen is not None:
            if seen:
                stamps.append(t)
            return
        chunk = json.loads(data)
        if "error" in chunk:
            raise RuntimeError(chunk["error"])
        if chunk.get("usage"):
            usage.append(chunk["usage"])
        if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
            stamps.append(t)
    await conn.stream("/v1/chat/completions", json.dumps(body).encode(), on_data)
    return {"stamps": stamps, "tokens": usage[-1]["completion_tokens"] if usage else len(stamps)}


async def load(base: str, concurrency: int, max_tokens: int, temperature: float, *, clients: int = 1,
               server_pid: int | None = None) -> dict:
    """`clients` > 1: the measured streams come from that many processes (ops.gpu.serve_load); `server_pid`:
    add the server's CPU µs per streamed token, by process (main, HTTP workers, nats-server)."""
    conns = [StreamConn(base) for _ in range(concurrency)]   # one connection per stream (ops.gpu.sse_client)
    try:
        await asyncio.gather(*(one(conns[i], i, 16, temperature) for i in range(min(8, concurrency))))
        await asyncio.gather(*(one(conns[i], i, 4, temperature) for i in range(concurrency)))  # this width
        async with httpx.AsyncClient(timeout=600) as client:
            if clients > 1:
                marks: dict = {}

                def at_start() -> None:   # after the client processes' warm-up requests, before their streams
                    marks["before"] = httpx.get(f"{base}/v1/stats", timeout=60).json()["engine"]
                    marks["cpu0"] = server_cpu(server_pid) if server_pid else None

                results, t0 = await asyncio.to_thread(split_load, base, concurrency, max_tokens, temperature,
                                                      clients, at_start)
                before, cpu0 = marks["before"], marks["cpu0"]
            else:
                before = (await client.get(f"{base}/v1/stats")).json()["engine"]
                cpu0 = server_cpu(server_pid) if server_pid else None
                t0 = time.perf_counter()
                results = await asyncio.gather(*(one(conns[i], i, max_tokens, temperature)
                                                 for i in range(concurrency)))
            wall = time.perf_counter() - t0
            cpu1 = server_cpu(server_pid) if server_pid else None
            after = (await client.get(f"{base}/v1/stats")).json()["engine"]
    finally:
        for conn in conns:
            conn.close()
    tokens = sum(r["tokens"] for r in results)
    cpu = cpu_per_token(cpu0, cpu1, tokens) if cpu0 is not None else {}
    return {**summarize([r["stamps"] for r in results], t0, wall, tokens), **device_share(before, after), **cpu}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--engine-overlap", choices=["auto", "on", "off"], default="on")
    ap.add_argument("--http-workers", type=int, default=1, help="aotx serve --http-workers")
    ap.add_argument("--clients", type=int, default=1, help="client processes the streams are spread over")
    ap.add_argument("--ignore-eos", action="store_true", help="every stream runs to --max-tokens (vLLM's switch)")
    args = ap.parse_args(argv)
    set_ignore_eos(args.ignore_eos)
    with tempfile.TemporaryDirectory(prefix="aotx-serve-bench-") as var:
        proc, base = start_server(args.backend, args.concurrency, args.max_tokens, var, args.engine_overlap,
                                  http_workers=args.http_workers)
        try:
            res = asyncio.run(load(base, args.concurrency, args.max_tokens, args.temperature, clients=args.clients,
                                   server_pid=proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"\n## aotx serve over HTTP ({args.backend}, engine overlap {args.engine_overlap}, "
          f"{args.http_workers} HTTP worker(s), {args.clients} client process(es)), "
          f"{args.concurrency} concurrent streaming chats\n")
    print("| requests | tokens | wall s | aggregate tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms "
          "| device busy | decode batch mean / max |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {res['requests']} | {res['tokens']} | {res['wall_s']:.2f} | {res['tok_s']:,.0f} | "
          f"{res['ttft_p50_ms']:.1f} | {res['ttft_p99_ms']:.1f} | {res['itl_p50_ms']:.2f} | {res['itl_p99_ms']:.2f} | "
          f"{res['device_busy_share']:.0%} | {res['mean_decode_batch']:.0f} / {res['max_decode_batch']} |")
    print("\nserver CPU µs per streamed token: " + ", ".join(
        f"{k.removeprefix('cpu_us_per_token_')} {v:.0f}" for k, v in res.items() if k.startswith("cpu_us")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
