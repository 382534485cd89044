"""Structured outputs: decode tok/s with a json_schema against without, same engine, same run.

    .venv/bin/python -m ops.bench.structured                                  # CPU, 1 stream
    .venv/bin/python -m ops.bench.structured --backend cuda --streams 64     # the H200

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
import asyncio
import sys
import time

from aotx.engine import Engine, EngineConfig, SamplingParams
from aotx.structured import ConstraintCompiler
from aotx.structured.batch import threads
from kernels import create_backend, load_model

PROMPT = "Write a long story about a dragon who learns to bake bread, as JSON with the key story."
# the string cannot close within the budget: both kinds decode exactly --tokens per stream
SCHEMA = {"type": "object", "properties": {"story": {"type": "string", "minLength": 4096}},
          "required": ["story"], "additionalProperties": False}


class MaskClock:
    """Host time spent filling bitmasks (aotx.structured.batch.fill_rows), for the report."""

    def __init__(self) -> None:
        from aotx.structured import batch
        self.calls, self.rows, self.seconds, self._fill = 0, 0, 0.0, batch.fill_rows
        batch.fill_rows = self

    def __call__(self, matchers, bits) -> None:
        start = time.perf_counter()
        self._fill(matchers, bits)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.rows += len(matchers)


class Timed:
    """Time spent in one method (on whatever thread calls it), for the report."""

    def __init__(self, cls, name: str) -> None:
        self.calls, self.seconds, real = 0, 0.0, getattr(cls, name)
        clock = self

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - start
                clock.calls += 1

        setattr(cls, name, timed)

    def per_call_ms(self) -> float:
        return 1e3 * self.seconds / max(self.calls, 1)


async def run(engine: Engine, prompt: list[int], streams: int, tokens: int, constraint) -> dict:
    params = [SamplingParams(max_tokens=tokens, temperature=0.7, seed=i, constraint=constraint) for i in range(streams)]
    launcher = engine.runner.launcher
    if hasattr(launcher, "reset_timing"):
        launcher.reset_timing()
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
    decode_time = end - max(first)
    busy = launcher.timing().get("busy_share", float("nan")) if hasattr(launcher, "timing") else float("nan")
    return {"tokens": sum(counts), "decode_tok_s": (sum(counts) - streams) / decode_time if decode_time > 0
            else float("nan"), "wall_s": end - start, "busy": busy}


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    bundle = load_model(progress=False)
    tok = bundle.tokenizer
    prompt = tok.encode(bundle.chat_template.render([{"role": "user", "content": PROMPT}],
                                                    add_generation_prompt=True))
    page_size = 16
    num_pages = args.streams * -(-(len(prompt) + args.tokens) // page_size) + 8
    backend = create_backend(args.backend, bundle, num_pages=num_pages, page_size=page_size)
    engine = Engine(backend, tok, EngineConfig(max_batch=max(args.streams, 1), num_pages=num_pages,
                                               page_size=page_size, max_model_len=4096))
    constraint = ConstraintCompiler(tok).json_schema(SCHEMA)
    from aotx.engine import masks
    from aotx.engine.mask_worker import MaskWorker
    # the engine thread: getting a step's mask where its sampling is enqueued (waiting for the worker,
    # or computing it there with AOTX_MASK_WORKER=0), and consuming the tokens it reads back
    clock, late, consume = MaskClock(), Timed(masks.LateMask, "__call__"), Timed(MaskWorker, "read_back")
    engine.start()
    try:
        await run(engine, prompt, args.streams, 4, None)              # warm-up, both paths
        await run(engine, prompt, args.streams, 4, constraint)
        plain, constrained = [], []
        for i in range(args.repeat):
            plain.append(await run(engine, prompt, args.streams, args.tokens, None))
            constrained.append(await run(engine, prompt, args.streams, args.tokens, constraint))
            print(f"[structured] round {i + 1}: plain {plain[-1]['decode_tok_s']:.1f} tok/s, "
                  f"json_schema {constrained[-1]['decode_tok_s']:.1f} tok/s", file=sys.stderr)
    finally:
        await engine.stop()
    best = {k: max(v, key=lambda r: r["decode_tok_s"]) for k, v in (("plain", plain), ("json_schema", constrained))}
    print(f"\n## Structured outputs ({backend.name}, {args.streams} stream(s), {args.tokens} tokens, "
          f"best of {args.repeat})\n")
    print("| run | tokens | decode tok/s | device busy share |")
    print("|---|---:|---:|---:|")
    for k, r in best.items():
        print(f"| {k} | {r['tokens']} | {r['decode_tok_s']:.1f} | {r['busy']:.2f} |")
    ratio = best["json_schema"]["decode_tok_s"] / best["plain"]["decode_tok_s"]
    print(f"\njson_schema / plain decode tok/s: {ratio:.3f}x")
    worker = "on the mask worker" if engine.runner.masks.started else "on the engine thread"
    if clock.calls:
        print(f"\nmask fill on the host: {1e3 * clock.seconds / clock.calls:.3f} ms per call "
              f"({clock.rows / clock.calls:.1f} rows per call, {clock.calls} calls; {worker}; "
              f"AOTX_MASK_WORKER={os.environ.get('AOTX_MASK_WORKER', '1')}, AOTX_MASK_THREADS="
              f"{os.environ.get('AOTX_MASK_THREADS', '')!r} -> {threads()} threads)")
    if late.calls:
        print(f"engine thread getting a step's mask where its sampling is enqueued: {late.per_call_ms():.3f} ms "
              f"per step ({late.calls} steps)")
    if consume.calls:
        print(f"engine thread consuming the tokens it reads back: {consume.per_call_ms():.3f} ms per step "
              f"({consume.calls} steps)")


if __name__ == "__main__":
    asyncio.run(main())
