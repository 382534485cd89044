"""Structured outputs: decode tok/s with a json_schema against without, same engine, same run.

    .venv/bin/python -m ops.bench.structured                                  # CPU, 1 stream
    .venv/bin/python -m ops.bench.structured --backend cuda --streams 64     # the H200

Variants (``--variants``, all by default): ``plain``; ``json_schema``; ``all_allowed``, the constrained
code path with a mask allowing every token but EOS and no llguidance (ops/bench/structured_probe.py);
``json_schema_worker``, json_schema with each step's sampling enqueued by the mask worker after the fill
(CudaStepLauncher.gated False: the session-6 behaviour; CUDA only), where json_schema has it enqueued at
the launch behind a gate the worker opens (kernels/cuda/mask_gate.py); ``json_schema_engine``, enqueued
by the engine thread (sample_on_worker False too: the session-5 behaviour); ``json_schema_procs``, json_schema
with the matchers in ``--procs`` matcher processes (aotx.engine.mask_procs: what AOTX_MASK_PROCS turns on;
json_schema itself runs the engine's default, the mask worker thread unless AOTX_MASK_PROCS is set). On CUDA each run also prints
its per-step breakdown (kernels/cuda/step_timing.py).

Every stream gets the same chat prompt (a story); the constrained runs carry a JSON schema whose one
string field holds the story, so both kinds decode for the whole budget (an early stop only shortens
a run; tok/s counts what was decoded). Runs alternate plain / constrained, `--repeat` times; the best
of each kind is kept (a shared box is noisy). Decode tok/s counts tokens after each stream's first,
over the time from the last first token to the end. Prints a markdown table and the ratio.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import argparse
import statistics
import asyncio
import sys
import time

from aotx.engine import Engine, EngineConfig, SamplingParams
from aotx.structured import ConstraintCompiler
from aotx.engine.mask_procs import ProcMaskWorker, procs
from aotx.engine.mask_worker import SWITCH_S
from aotx.structured.batch import lexers, par_rows, threads
from kernels import create_backend, load_model
from ops.bench.structured_probe import (AllAllowed, HostClocks, MaskClock, MaskTimes, ThreadCpu, Timed, WaitCpu,
                                        breakdown_table, mask_chain_table, thread_cpu_table)

VARIANTS = ("plain", "json_schema", "all_allowed", "json_schema_worker", "json_schema_engine", "json_schema_procs")

PROMPT = "Write a long story about a dragon who learns to bake bread, as JSON with the key story."
# the string cannot close within the budget: both kinds decode exactly --tokens per stream
SCHEMA = {"type": "object", "properties": {"story": {"type": "string", "minLength": 4096}},
          "required": ["story"], "additionalProperties": False}


async def run(engine: Engine, prompt: list[int], streams: int, tokens: int, constraint, host: HostClocks | None = None,
              on_worker: bool = True, chain: MaskTimes | None = None, gated: bool = True,
              waits: WaitCpu | None = None) -> dict:
    params = [SamplingParams(max_tokens=tokens, temperature=0.7, seed=i, constraint=constraint) for i in range(streams)]
    launcher = engine.runner.launcher
    if hasattr(launcher, "reset_timing"):
        launcher.reset_timing()
    if hasattr(launcher, "sample_on_worker"):
        launcher.sample_on_worker = on_worker
    if getattr(launcher, "gate", None) is not None:
        launcher.gated = gated
    if host is not None:
        host.start()
    if chain is not None:
        chain.reset()
    cpu0, waits0 = ThreadCpu.snapshot(), waits.snapshot() if waits is not None else {}
    start = time.perf_counter()
    handles = [engine.submit(prompt, p) for p in params]
    first: list[float] = []
    counts = [0] * streams

    async def consume(i: int, handle) -> None:
        async for delta in handle:
            if delta.token_ids and counts[i] == 0:
                first.append(time.perf_counter())
            counts[i] += len(delta.token_ids)

    await asyncio.gather(*(consume(i, h) for i, h in enumerate(handles)))
    end = time.perf_counter()
    cpu1, waits1 = ThreadCpu.snapshot(), waits.snapshot() if waits is not None else {}
    steps = host.launches() if host is not None else 0
    cpu = ThreadCpu.per_step(cpu0, cpu1, steps) if steps else {}
    waited = {n: 1e3 * (v - waits0.get(n, 0.0)) / steps for n, v in waits1.items()} if steps else {}
    decode_time = end - max(first)
    timing = launcher.timing() if hasattr(launcher, "timing") else {}
    timeline = getattr(launcher, "timeline", None)
    parts = timeline.summary() if timeline is not None else {}
    if parts and timing.get("steps"):
        parts["rows_per_step"] = sum(counts) / timing["steps"]
    return {"tokens": sum(counts), "decode_tok_s": (sum(counts) - streams) / decode_time if decode_time > 0
            else float("nan"), "wall_s": end - start, "busy": timing.get("busy_share", float("nan")),
            "parts": parts, "host": host.since() if host is not None else {},
            "chain": chain.summary() if chain is not None else {}, "cpu": cpu, "waits": waited, "steps": steps}


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--procs", type=int, default=procs() or 2, help="json_schema_procs' matcher processes "
                    "(default: AOTX_MASK_PROCS, else 2)")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if not set(variants) <= set(VARIANTS) or "plain" not in variants:
        ap.error(f"--variants: plain and any of {', '.join(VARIANTS[1:])}")

    bundle = load_model(progress=False)
    tok = bundle.tokenizer
    prompt = tok.encode(bundle.chat_template.render([{"role": "user", "content": PROMPT}],
                                                    add_generation_prompt=True))
    page_size = 16
    num_pages = args.streams * -(-(len(prompt) + args.tokens) // page_size) + 8
    backend = create_backend(args.backend, bundle, num_pages=num_pages, page_size=page_size)
    engine = Engine(backend, tok, EngineConfig(max_batch=max(args.streams, 1), num_pages=num_pages,
                                               page_size=page_size, max_model_len=4096))
    eos = bundle.config.eos_id
    schema = ConstraintCompiler(tok).json_schema(SCHEMA)
    constraints = {"plain": None, "json_schema": schema, "json_schema_worker": schema, "json_schema_engine": schema,
                   "json_schema_procs": schema, "all_allowed": AllAllowed(schema.vocab_size, eos)}
    ways = {v: {"on_worker": v != "json_schema_engine", "gated": v not in ("json_schema_worker", "json_schema_engine")}
            for v in variants}
    from aotx.engine import masks
    from aotx.engine.mask_worker import MaskWorker
    # the engine thread: getting a step's mask where its sampling is enqueued (waiting for the worker,
    # or computing it there with AOTX_MASK_WORKER=0), and consuming the tokens it reads back
    clock, late, consume = MaskClock(eos), Timed(masks.LateMask, "__call__"), Timed(MaskWorker, "read_back")
    # json_schema_procs swaps the engine's mask worker between runs (the engine is idle then)
    workers = {"default": engine.runner.masks, "procs": ProcMaskWorker(args.procs, tok)}
    read_back: dict[str, list] = {v: [0, 0.0] for v in variants}
    pooled: dict[str, list] = {v: [0, 0.0, 0.0] for v in variants}   # steps, processes' consume s, fill s
    host, chain, waits = HostClocks(), MaskTimes(), WaitCpu()
    launcher = engine.runner.launcher
    if hasattr(launcher, "breakdown"):
        launcher.breakdown(True)
    engine.start()
    results: dict[str, list[dict]] = {v: [] for v in variants}
    fills: dict[str, list] = {v: [0, 0, 0.0] for v in variants}
    try:
        for v in variants:                                             # warm-up, every path
            engine.runner.masks = workers["procs" if v == "json_schema_procs" else "default"]
            await run(engine, prompt, args.streams, 4, constraints[v], **ways[v])
        for i in range(args.repeat):
            for v in variants:
                engine.runner.masks = workers["procs" if v == "json_schema_procs" else "default"]
                pool = getattr(engine.runner.masks, "pool", None)
                before, rb, pb = clock.snapshot(), consume.snapshot(), _pool_snapshot(pool)
                results[v].append(await run(engine, prompt, args.streams, args.tokens, constraints[v], host,
                                            chain=chain, waits=waits, **ways[v]))
                after = clock.snapshot()
                fills[v] = [a + (b - c) for a, b, c in zip(fills[v], after, before)]
                read_back[v] = [a + (b - c) for a, b, c in zip(read_back[v], consume.snapshot(), rb)]
                pooled[v] = [a + (b - c) for a, b, c in zip(pooled[v], _pool_snapshot(pool), pb)]
            print(f"[structured] round {i + 1}: " + ", ".join(f"{v} {results[v][-1]['decode_tok_s']:.1f} tok/s"
                                                             for v in variants), file=sys.stderr)
    finally:
        await engine.stop()
        for w in workers.values():
            w.close()
    best = {v: max(rs, key=lambda r: r["decode_tok_s"]) for v, rs in results.items()}
    print(f"\n## Structured outputs ({backend.name}, {args.streams} stream(s), {args.tokens} tokens, "
          f"best of {args.repeat})\n")
    print("| run | tokens | decode tok/s | ÷ plain | device busy share (start to end event) | mask fill ms/call "
          "| engine thread's read-back hand-over ms/step |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for v, r in best.items():
        calls, _, secs = fills[v]
        fill = f"{1e3 * secs / calls:.3f}" if calls else ""
        if pooled[v][0]:
            fill = f"{1e3 * pooled[v][2] / pooled[v][0]:.3f} (processes; consume {1e3 * pooled[v][1] / pooled[v][0]:.3f})"
        hand = f"{1e3 * read_back[v][1] / read_back[v][0]:.3f}" if read_back[v][0] else ""
        print(f"| {v} | {r['tokens']} | {r['decode_tok_s']:.1f} | {r['decode_tok_s'] / best['plain']['decode_tok_s']:.3f} "
              f"| {r['busy']:.2f} | {fill} | {hand} |")
    print("\n(mask fill: llguidance's call on the host, all runs; for matcher processes the slowest process's "
          "fill a step, its consume beside it. Read-back hand-over: MaskWorker.read_back on the engine thread, "
          "the consume there for the thread path, the frame to the processes for theirs; plain steps included)")
    if "json_schema_procs" in best:
        ratio = best["json_schema_procs"]["decode_tok_s"] / best["plain"]["decode_tok_s"]
        print(f"\njson_schema_procs ({args.procs} matcher processes) / plain decode tok/s: {ratio:.3f}x")
    if "json_schema" in best:
        ratio = best["json_schema"]["decode_tok_s"] / best["plain"]["decode_tok_s"]
        print(f"\njson_schema / plain decode tok/s: {ratio:.3f}x")
        rounds = [j["decode_tok_s"] / p["decode_tok_s"] for j, p in zip(results["json_schema"], results["plain"])]
        print(f"json_schema / plain in each round (the same round's plain): "
              f"{', '.join(f'{r:.3f}' for r in rounds)}; median {statistics.median(rounds):.3f}x")
    if any(r["parts"] for r in best.values()):
        print("\n### Per step, the best run of each\n")
        print(breakdown_table([(v, r["parts"], r["host"]) for v, r in best.items()]))
    if any(r["cpu"] for r in best.values()):
        print("\n### Each thread's CPU a step, the best run of each (is the step GIL-bound?)\n")
        print(thread_cpu_table([(v, r["parts"]["period"][0] if r["parts"] else 1e3 * r["wall_s"] / max(r["steps"], 1),
                                 r["cpu"], r["waits"], r["steps"]) for v, r in best.items()]))
    if any(r["chain"].get("masks") for r in best.values()):
        print("\n### Each mask's chain on the host, the best run of each\n")
        print(mask_chain_table([(v, r["chain"]) for v, r in best.items()]))
    worker = "on the mask worker" if engine.runner.masks.started else "on the engine thread"
    if clock.calls:
        print(f"\nmask fill on the host: {1e3 * clock.seconds / clock.calls:.3f} ms per call "
              f"({clock.rows / clock.calls:.1f} rows per call, {clock.calls} calls, all_allowed's included; {worker}; "
              f"AOTX_MASK_WORKER={os.environ.get('AOTX_MASK_WORKER', '1')}, AOTX_MASK_THREADS="
              f"{os.environ.get('AOTX_MASK_THREADS', '')!r} -> {threads()} threads; AOTX_MASK_LEXERS="
              f"{os.environ.get('AOTX_MASK_LEXERS', '')!r} -> {schema.prototypes} lexers (default {lexers()}); "
              f"the worker (where it runs) consumes: {getattr(engine.runner.masks, 'consumes', False)}, in one call "
              f"from {par_rows()} rows (AOTX_MASK_CONSUME_PAR), early: {getattr(engine.runner.masks, 'early', False)}; "
              f"GIL switch interval while a worker runs: {os.environ.get('AOTX_GIL_SWITCH_S') or SWITCH_S} s; mask gate "
              f"{'on' if getattr(launcher, 'gate', None) is not None else 'off'})")
    if late.calls:
        print(f"engine thread getting a step's mask where its sampling is enqueued: {late.per_call_ms():.3f} ms "
              f"per step ({late.calls} steps)")
    if consume.calls:
        print(f"engine thread's read-back hand-over (with the consume where AOTX_MASK_CONSUME=engine): "
              f"{consume.per_call_ms():.3f} ms per step "
              f"({consume.calls} steps, plain ones included)")

def _pool_snapshot(pool) -> tuple[int, float, float]:
    return (pool.steps, pool.consume_s, pool.fill_s) if pool is not None else (0, 0.0, 0.0)


if __name__ == "__main__":
    asyncio.run(main())
