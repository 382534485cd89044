"""Shared inputs end to end against the same prompts through /v1/chat/completions, in one run
(a benchmark, not a test).

    .venv/bin/python -m ops.bench.shared_inputs [--backend auto] [--levels 1,8,32] [--max-tokens 32]
                                                [--embedding-worker auto|process|thread]

Starts `aotx serve` (embedded NATS, the shared runtime and the model) with a temporary state
directory. For each concurrency level N: N conversations, each in a fresh private space (so no
input recalls memory and the prompts equal the chat ones), each get one input (POST
/conversations/{con}/inputs, then GET /operations/{op}/events followed to its `end` event), and
the same N prompts go to /v1/chat/completions as streaming requests, all at once. Conversation i
belongs to participant i mod P (--participants; default one participant per conversation): each
participant posts its inputs one after another (its sequences are ordered), the participants at
once; each follower starts as soon as its POST answers. Reports inputs/s (N over the wall time to
the last end), time to the first SSE output byte (p50, from the start of the input's POST) and the
same for Chat Completions, and the journal's overhead as the ratio chat inputs/s ÷ shared inputs/s (target ≤ 1.3);
then the median time from an input's POST to each stage of its way to the first output byte, the
client's and the server's (AOTX_INPUT_TRACE, set for the server it starts: aotx.runtime.input_trace).
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
from typing import Callable

import httpx
import numpy as np

from aotx.runtime.embedding import WORKERS, embedding_worker
from aotx.runtime.input_trace import ENV as INPUT_TRACE
from api.gateway_config import add_dev_principal, ensure_dev_config
from ops import proc_cpu
from ops.bench.stage_trace import read_trace, stage_medians, table
from ops.gpu.serve_bench import start_server
from scenarios import HttpTransport, Model, Party, Runner

BASE = "/aotx/v1/shared"
PROMPTS = ["Name three rivers.", "What is a prime number?", "Describe a cat in one sentence.",
           "Give two uses of copper.", "Why is the sky blue?", "List three fruits.",
           "What does a compiler do?", "Say something about the moon."]


def actor(i: int, participants: int) -> str:
    return f"p{i % participants}"


def setup_steps(tag: str, conversations: int, participants: int) -> list[dict]:
    """A fresh private space with one conversation for each input of a level, owned by participant
    i mod P, as scenario steps: no input recalls memory, so the shared prompts are the same bytes as
    the Chat Completions ones and the ratio measures the journal (and memory retention)."""
    return [step for i in range(conversations) for step in (
        {"actor": actor(i, participants), "do": "space", "scope": "private", "name": f"{tag}space{i}", "expect": 201},
        {"actor": actor(i, participants), "do": "conversation", "space": f"{tag}space{i}", "name": f"{tag}con{i}",
         "expect": 201})]


def input_steps(tag: str, n: int, max_tokens: int, participants: int) -> list[dict]:
    """One input in each of the level's n conversations, as scenario steps named {tag}{i}."""
    return [{"actor": actor(i, participants), "do": "input", "conversation": f"{tag}con{i}",
             "text": PROMPTS[i % len(PROMPTS)], "max_output_tokens": max_tokens, "temperature": 0,
             "name": f"{tag}{i}", "expect": 202}
            for i in range(n)]


async def follow(client: httpx.AsyncClient, headers: dict, op: str, t0: float, posted: float) -> dict:
    first, end, ended = None, None, None
    async with client.stream("GET", f"{BASE}/operations/{op}/events", headers=headers) as r:
        opened = time.perf_counter()
        async for line in r.aiter_lines():
            if line.startswith("event: output") and first is None:
                first = time.perf_counter()
            if line.startswith("data: ") and end is None and '"execution"' in line:
                data = json.loads(line[6:])
                if "finish" in data:
                    end, ended = data, time.perf_counter()
    first = first or time.perf_counter()
    return {"ttfb": first - t0, "end": end, "op": op,
            "stamps": {"t0": t0, "posted": posted, "opened": opened, "first_byte": first,
                       **({"ended": ended} if ended is not None else {})}}


async def shared_level(runner: Runner, client: httpx.AsyncClient, tag: str, n: int, max_tokens: int,
                       participants: int, cpu: Callable[[], dict] = dict) -> dict:
    """The input steps of a level through the runner: each participant posts its inputs one after
    another (its sequences are ordered), the participants at once; each input is followed at once.
    `cpu` (the server's CPU seconds so far) is read right before the first POST and after the last end."""
    await runner.run(setup_steps(tag, n, participants))
    steps = input_steps(tag, n, max_tokens, participants)
    cpu0 = cpu()
    start = time.perf_counter()

    async def participant(name: str) -> list[dict]:
        headers = {"Authorization": f"Bearer {runner.parties[name].token}"}
        tasks = []
        for step in (s for s in steps if s["actor"] == name):
            t0 = time.perf_counter()
            await runner.run_step(step)
            tasks.append(asyncio.create_task(follow(client, headers, runner.names[step["name"]], t0,
                                                    time.perf_counter())))
        return await asyncio.gather(*tasks)

    names = sorted({s["actor"] for s in steps})
    results = [r for rows in await asyncio.gather(*(participant(name) for name in names)) for r in rows]
    wall = time.perf_counter() - start
    used = proc_cpu.delta(cpu0, cpu())
    bad = [r["end"] for r in results if not r["end"] or r["end"]["execution"] != "completed"]
    if bad:
        raise RuntimeError(f"inputs did not complete: {bad[:3]}")
    return {"wall": wall, "per_s": n / wall, "ttfb_p50": float(np.median([r["ttfb"] for r in results])),
            "cpu": used, "ends": [r["stamps"]["ended"] - start for r in results if "ended" in r["stamps"]], "inputs": {trace_key(r["op"]): r["stamps"] for r in results}}


def trace_key(op: str) -> str:
    """An operation ID's input as aotx.runtime.input_trace names it: `<lineage hex>/<sequence>`."""
    _, lineage, ident = op.split("-")
    return f"{lineage}/{int(ident[:16], 16)}"


def breakdown(rows: list[dict], trace: dict[str, dict[str, float]], q: float = 50.0) -> list[tuple[int, dict[str, float]]]:
    """Per level, the median (`q`th percentile) time (ms) from each input's POST to each stage (client's
    and server's)."""
    return [(r["n"], stage_medians(r["shared"]["inputs"], trace, STAGES, q)) for r in rows]


def ends_table(rows: list[dict]) -> str:
    """When the requests of a level ended, ms from the level's start (its wall clock is the last one)."""
    lines = ["\nends, ms from the level's start (the wall clock is the last one)\n",
             "| concurrent | shared p50 | shared p90 | shared last | chat p50 | chat p90 | chat last |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [f"{np.percentile(ends, q) * 1e3:.0f}" if ends else "–"
                 for ends in (r["shared"]["ends"], r["chat"]["ends"]) for q in (50, 90, 100)]
        lines.append(f"| {r['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_table(rows: list[dict]) -> str:
    """The server's CPU ms per shared input and per chat request, by where it was spent."""
    lines = ["\nserver CPU ms per request (main = the event loop's thread; process = all the server's threads; "
             "children = nats-server and the embedding worker)\n",
             "| concurrent | shared main | chat main | shared process | chat process | shared children | chat children |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s, c, n = r["shared"]["cpu"], r["chat"]["cpu"], r["n"]
        lines.append(f"| {n} | " + " | ".join(f"{d[k] * 1e3 / n:.1f}" for k in ("main", "process", "children")
                                               for d in (s, c)) + " |")
    return "\n".join(lines)


# the client's (posted: the 202; opened: the events stream's headers; first_byte; ended: the `end`
# event) and the server's (aotx.runtime.input_trace) stages, about in the order they happen
STAGES = ("received", "round", "acked", "posted", "begun", "submitted", "prompt", "first_delta", "opened",
          "embedded", "first_output", "first_byte", "last_delta", "completed", "ended")


async def chat_one(client: httpx.AsyncClient, base: str, i: int, model: str, max_tokens: int) -> tuple[float, float]:
    """(time to its first content chunk, when it ended: perf_counter)."""
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]}
    t0, first = time.perf_counter(), None
    async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if first is None and line.startswith("data: ") and line != "data: [DONE]":
                choices = json.loads(line[6:]).get("choices") or [{}]
                if choices[0].get("delta", {}).get("content"):
                    first = time.perf_counter()
    return (first or time.perf_counter()) - t0, time.perf_counter()


async def chat_level(client: httpx.AsyncClient, base: str, n: int, model: str, max_tokens: int,
                     cpu: Callable[[], dict] = dict) -> dict:
    cpu0 = cpu()
    start = time.perf_counter()
    got = await asyncio.gather(*(chat_one(client, base, i, model, max_tokens) for i in range(n)))
    wall = time.perf_counter() - start
    return {"wall": wall, "per_s": n / wall, "ttfb_p50": float(np.median([t for t, _ in got])),
            "cpu": proc_cpu.delta(cpu0, cpu()), "ends": [end - start for _, end in got]}


async def run(base: str, var: Path, levels: list[int], max_tokens: int, participants: int,
              cpu: Callable[[], dict] = dict) -> list[dict]:
    names = [actor(i, participants) for i in range(participants)]
    limits = httpx.Limits(max_connections=2 * max(levels) + 8)
    transport = HttpTransport(base, timeout=600)
    runner = Runner({name: Party(name, (var / "tokens" / name).read_text().strip(), transport) for name in names},
                    Model(names))
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client:
        try:
            await runner.sync()
            model = runner.model_name
            for name in names:
                if not runner.model.parties[name].registered:
                    await runner.run_step({"actor": name, "do": "register", "expect": 201})
            await shared_level(runner, client, "warm", 2, 4, participants)   # warm-up, both paths
            await chat_level(client, base, 2, model, 4)
            rows = []
            for n in levels:
                shared = await shared_level(runner, client, f"n{n}-", n, max_tokens, participants, cpu)
                chat = await chat_level(client, base, n, model, max_tokens, cpu)
                rows.append({"n": n, "shared": shared, "chat": chat, "ratio": chat["per_s"] / shared["per_s"]})
                sys.stderr.write(f"[shared_inputs] {n}: shared {shared['per_s']:.2f}/s chat {chat['per_s']:.2f}/s\n")
            checks = await runner.verify()   # every receipt and result read back, as the property tests do
            sys.stderr.write(f"[shared_inputs] {checks} receipts and results read back unchanged\n")
            return rows
        finally:
            await transport.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--participants", type=int, default=0,
                    help="participants posting the inputs, conversation i belongs to participant i mod P "
                         "(default: one per conversation of the largest level; 1 = one participant posts all, "
                         "its sequences in order)")
    ap.add_argument("--embedding-worker", choices=list(WORKERS), default="auto",
                    help="the server's --embedding-worker (where inputs' texts are embedded; default auto, as the "
                         "server's: a process from 4 usable CPUs on, else a thread)")
    ap.add_argument("--paced-step-ms", type=float, default=None, metavar="MS",
                    help="serve over ops.bench.paced_serve's stand-in for the GPU instead of --backend's model: "
                         "each engine step a sleep of MS (the engine's overlapped launcher on), so the CPU runs "
                         "the server's path at about the H200's token rate")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    participants = args.participants or max(levels)
    with tempfile.TemporaryDirectory(prefix="aotx-shared-bench-") as var:
        trace_path = Path(var) / "input-trace.jsonl"
        os.environ[INPUT_TRACE] = str(trace_path)   # the server stamps each input's stages there
        config, tokens, _ = ensure_dev_config(var)
        for i in range(participants):
            add_dev_principal(config, tokens, actor(i, participants))
        paced = () if args.paced_step_ms is None else ("-m", "ops.bench.paced_serve", "--step-ms",
                                                       str(args.paced_step_ms))
        proc, base = start_server("numpy" if paced else args.backend, max(levels), args.max_tokens, var,
                                  overlap="on" if paced else "auto", extra=("--embedding-worker", args.embedding_worker),
                                  entry=paced or ("-m", "ops.cli"))
        try:
            rows = asyncio.run(run(base, Path(var), levels, args.max_tokens, participants,
                                   lambda: proc_cpu.usage(proc.pid)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        trace = read_trace(trace_path)
    backend = args.backend if args.paced_step_ms is None else f"paced {args.paced_step_ms:g} ms a step"
    print(f"\n## shared inputs vs /v1/chat/completions ({backend}, max {args.max_tokens} output tokens, "
          f"{participants} participant(s), embedding in a {embedding_worker(args.embedding_worker)}"
          f"{' (auto)' if args.embedding_worker == 'auto' else ''})\n")
    print("| concurrent | shared inputs/s | chat req/s | overhead (chat ÷ shared) | shared first SSE byte p50 ms "
          "| chat first byte p50 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']} | {r['shared']['per_s']:.2f} | {r['chat']['per_s']:.2f} | {r['ratio']:.2f}× | "
              f"{r['shared']['ttfb_p50'] * 1e3:.0f} | {r['chat']['ttfb_p50'] * 1e3:.0f} |")
    print(table("shared input: median ms from its POST to each stage (posted = its 202, opened = its events "
                "stream's headers, first_byte = its first output event, ended = its end event; the others from the "
                "server's AOTX_INPUT_TRACE)", STAGES, breakdown(rows, trace)))
    print(table("the same, 90th percentile", STAGES, breakdown(rows, trace, 90.0)))
    print(ends_table(rows))
    print(cpu_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
