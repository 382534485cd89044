"""Stored Responses against store-less ones, and a resumed stream's first replayed event, in one run
(a benchmark, not a test).

    .venv/bin/python -m ops.bench.stored_responses [--backend auto] [--levels 1,8,32] [--max-tokens 32]
                                                   [--resumes 20] [--bursts 9]

Starts `aotx serve` (embedded NATS, the shared runtime and the model) with a temporary state
directory. For each concurrency level N, `--bursts` times each, alternately (true, false, then false,
true, ...): N streaming POST /v1/responses with `store: true` (or false), all at once, each read to its
terminal event. Reports responses/s (N over the wall time to the last terminal event; the median of the
bursts) for both and the overhead as the ratio store:false responses/s ÷ store:true responses/s (the
median of the bursts' pairs, with each pair's; issue 11's target ≤ 1.15; one burst of 32 lasts ~250 ms
on the H200, so a single pair moved 1.17× → 1.38× between two runs), and the first
`response.output_text.delta` latency p50 of each; the server's CPU per response of each kind (its main
thread, the event loop, and all its threads: ops.proc_cpu, /proc schedstat); then, for store:true, the median time from the POST
to each stage, the client's and the server's (AOTX_INPUT_TRACE, set for the server it starts:
CreateResponse sent / engine asked / CreateResponse acknowledged / headers / first delta /
FinishResponse sent / acknowledged / terminal event), and for store:false the stages it has (engine asked,
headers, first delta, terminal event).

Then `--resumes` times: a background streamed response (`background: true, stream: true`) read for
`--cut` events, the connection dropped, and GET /v1/responses/{id}?stream=true&starting_after=N
(N: four events before the last one read, so the event replayed first is saved) timed from the
request to its first replayed event (the event N + 1, checked) — while the run is live and once it
has finished. Reports p50 and max (target: within 20 ms of the request).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from aotx.runtime.input_trace import ENV as INPUT_TRACE
from ops.bench.stage_trace import read_trace, stage_medians, table
from ops.gpu.serve_bench import start_server
from ops.proc_cpu import CpuMeter

MODEL = "smollm2-135m-instruct"
PROMPTS = ["Name three rivers.", "What is a prime number?", "Describe a cat in one sentence.",
           "Give two uses of copper.", "Why is the sky blue?", "List three fruits.",
           "What does a compiler do?", "Say something about the moon."]
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _body(i: int, max_tokens: int, **extra) -> dict:
    return {"model": MODEL, "input": PROMPTS[i % len(PROMPTS)], "max_output_tokens": max_tokens,
            "temperature": 0, "stream": True, **extra}


async def one(client: httpx.AsyncClient, i: int, max_tokens: int, store: bool) -> tuple[str, dict]:
    """(response id, client stamps: t0 = the POST, opened = the response's headers, first_delta, terminal)."""
    t0, first, rid = time.perf_counter(), None, ""
    async with client.stream("POST", "/v1/responses", json=_body(i, max_tokens, store=store)) as r:
        opened = time.perf_counter()
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            rid = rid or event.get("response", {}).get("id", "")
            if first is None and event["type"] == "response.output_text.delta":
                first = time.perf_counter()
            if event["type"] in TERMINAL:
                break
    end = time.perf_counter()
    return rid, {"t0": t0, "opened": opened, "first_delta": first or end, "terminal": end}


async def level(client: httpx.AsyncClient, n: int, max_tokens: int, store: bool, pid: int | None = None) -> dict:
    meter = CpuMeter(pid)
    meter.start()
    start = time.perf_counter()
    done = await asyncio.gather(*(one(client, i, max_tokens, store) for i in range(n)))
    wall = time.perf_counter() - start
    loop_s, proc_s = meter.stop()
    firsts = [s["first_delta"] - s["t0"] for _, s in done]
    return {"per_s": n / wall, "first_p50": float(np.median(firsts)), "requests": dict(done),
            "loop_ms": None if loop_s is None else loop_s * 1e3 / n, "proc_ms": None if proc_s is None else proc_s * 1e3 / n}


# a store:true request's stages: the client's (opened: the response's headers; first_delta; terminal: the
# terminal event) and the server's (aotx.runtime.input_trace.stamp_response)
STAGES = ("create_sent", "submitted", "create_acked", "opened", "first_delta", "finish_sent", "finish_acked",
          "terminal")
PLAIN_STAGES = ("submitted", "opened", "first_delta", "terminal")   # a store:false request's (the same stamps)


async def _events(r: httpx.Response):
    async for line in r.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line[6:])


async def resumed_first(client: httpx.AsyncClient, rid: str, after: int) -> float:
    t0 = time.perf_counter()
    async with client.stream("GET", f"/v1/responses/{rid}",
                             params={"stream": "true", "starting_after": str(after)}) as r:
        r.raise_for_status()
        async for event in _events(r):
            assert event["sequence_number"] == after + 1, event
            return time.perf_counter() - t0
    raise AssertionError(f"no event after {after} in {rid}")


async def resume_once(client: httpx.AsyncClient, i: int, max_tokens: int, cut: int) -> tuple[float, float]:
    """(live, finished): the first replayed event's latency while the run goes on, and after its end."""
    seen = []
    async with client.stream("POST", "/v1/responses", json=_body(i, max_tokens, background=True)) as r:
        r.raise_for_status()
        async for event in _events(r):
            seen.append(event)
            if len(seen) == cut:
                break   # the connection drops here
    # resume a few events back (as a client whose last events were lost in flight): the first event to
    # send is saved already, so this times the replay, not the model's next token
    rid, after = seen[0]["response"]["id"], seen[-1]["sequence_number"] - 4
    live = await resumed_first(client, rid, after)
    while (await client.get(f"/v1/responses/{rid}")).json()["status"] in ("queued", "in_progress"):
        async with client.stream("GET", f"/v1/responses/{rid}", params={"stream": "true"}) as r:
            async for _ in r.aiter_bytes():   # follow the run to its end (a condition, not a sleep)
                pass
    return live, await resumed_first(client, rid, after)


def _pairs(stored: list[dict], plain: list[dict]) -> dict:
    """Bursts of one level, run alternately: each kind's median rate, the median of the pairs' ratios."""
    ratios = [p["per_s"] / s["per_s"] for s, p in zip(stored, plain)]
    def merged(runs, key):
        values = [r[key] for r in runs if r.get(key) is not None]
        return float(np.median(values)) if values else None
    requests: dict = {}
    for r in stored:
        requests.update(r["requests"])
    plain_requests: dict = {}
    for r in plain:
        plain_requests.update(r["requests"])
    kept = ("per_s", "first_p50", "loop_ms", "proc_ms")
    return {"stored": {**{k: merged(stored, k) for k in kept}, "requests": requests},
            "plain": {**{k: merged(plain, k) for k in kept}, "requests": plain_requests},
            "ratio": float(np.median(ratios)), "ratios": ratios}


async def run(base: str, levels: list[int], max_tokens: int, resumes: int, cut: int,
              bursts: int = 1, pid: int | None = None) -> tuple[list[dict], dict]:
    limits = httpx.Limits(max_connections=2 * max(levels) + 8)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client:
        await level(client, 2, 4, True)     # warm-up, both paths
        await level(client, 2, 4, False)
        rows = []
        for n in levels:
            stored, plain = [], []
            for b in range(bursts):   # alternately, the first kind taking turns, so drift hits both alike
                for store in ((True, False) if b % 2 == 0 else (False, True)):
                    (stored if store else plain).append(await level(client, n, max_tokens, store, pid))
                sys.stderr.write(f"[stored_responses] {n} burst {b + 1}: store:true {stored[-1]['per_s']:.2f}/s "
                                 f"store:false {plain[-1]['per_s']:.2f}/s\n")
            rows.append({"n": n, **_pairs(stored, plain)})
        pairs = [await resume_once(client, i, max(max_tokens, 2 * cut), cut) for i in range(resumes)]
    live, done = [p[0] for p in pairs], [p[1] for p in pairs]
    return rows, {"live_p50": float(np.median(live)), "live_max": max(live),
                  "done_p50": float(np.median(done)), "done_max": max(done)}


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--resumes", type=int, default=20)
    ap.add_argument("--cut", type=int, default=8, help="events read before the connection drops (≥ 5)")
    ap.add_argument("--bursts", type=int, default=9,
                    help="bursts of each kind per level, run alternately; the table gives medians (default 9: one slow burst of 32 must not decide the median)")
    args = ap.parse_args(argv)
    if args.cut < 5:
        ap.error("--cut must be at least 5")
    levels = [int(x) for x in args.levels.split(",")]
    with tempfile.TemporaryDirectory(prefix="aotx-stored-bench-") as var:
        trace_path = Path(var) / "stage-trace.jsonl"
        os.environ[INPUT_TRACE] = str(trace_path)   # the server stamps each stored response's stages there
        proc, base = start_server(args.backend, max(levels), max(args.max_tokens, 2 * args.cut), var)
        try:
            rows, resumed = asyncio.run(run(base, levels, args.max_tokens, args.resumes, args.cut, args.bursts,
                                              proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        trace = read_trace(trace_path)
    print(f"\n## /v1/responses store:true vs store:false ({args.backend}, max {args.max_tokens} output tokens, "
          f"{args.bursts} alternating bursts of each per level: medians)\n")
    print("| concurrent | store:true resp/s | store:false resp/s | overhead (false ÷ true, median of the pairs) "
          "| the pairs' overheads | store:true first delta p50 ms | store:false first delta p50 ms |")
    print("|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        spread = " ".join(f"{x:.2f}" for x in r["ratios"])
        print(f"| {r['n']} | {r['stored']['per_s']:.2f} | {r['plain']['per_s']:.2f} | {r['ratio']:.2f}× | {spread} | "
              f"{r['stored']['first_p50'] * 1e3:.0f} | {r['plain']['first_p50'] * 1e3:.0f} |")
    print("\nthe server's CPU per response (ms, median of the bursts; /proc schedstat): its main thread (the event "
          "loop) and all its threads (the engine's too)\n")
    print("| concurrent | store:true loop | store:false loop | loop added | store:true process | store:false process |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t, f = r["stored"], r["plain"]
        cells = [_ms(t["loop_ms"]), _ms(f["loop_ms"]), _ms(None if t["loop_ms"] is None or f["loop_ms"] is None
                                                            else t["loop_ms"] - f["loop_ms"]),
                 _ms(t["proc_ms"]), _ms(f["proc_ms"])]
        print(f"| {r['n']} | " + " | ".join(cells) + " |")
    print(table("store:true: median ms from the POST to each stage (opened = the response's headers, terminal = "
                "the terminal event; the others from the server's AOTX_INPUT_TRACE)", STAGES,
                [(r["n"], stage_medians(r["stored"]["requests"], trace, STAGES)) for r in rows]))
    print(table("store:false: the same stages (submitted: asked of the engine)", PLAIN_STAGES,
                [(r["n"], stage_medians(r["plain"]["requests"], trace, PLAIN_STAGES)) for r in rows]))
    print(f"\nresumed stream (GET ?stream=true&starting_after=N, {args.resumes} runs, cut after {args.cut} events): "
          f"first replayed event p50 {resumed['live_p50'] * 1e3:.1f} ms (max {resumed['live_max'] * 1e3:.1f}) "
          f"while the run is live, p50 {resumed['done_p50'] * 1e3:.1f} ms (max {resumed['done_max'] * 1e3:.1f}) "
          f"once it has finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
