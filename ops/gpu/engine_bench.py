"""The CUDA backend under the real Engine (scheduler, block manager, runner, detokenizer), real
weights: N concurrent streaming chat requests; aggregate tok/s and p50/p99 inter-token latency.

    python -m ops.gpu.engine_bench [--concurrency 64] [--max-tokens 256]

This is the engine's in-process surface; the HTTP surface adds its own serialisation on top.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from ops.gpu.latency import summarize
from ops.gpu.model_check import PROMPTS


async def run(concurrency: int, max_tokens: int, temperature: float) -> dict:
    from aotx.engine import Engine, EngineConfig, SamplingParams
    from kernels import create_backend, load_model

    bundle = load_model(progress=False)
    pages = concurrency * (-(-(96 + max_tokens) // 16)) + 64
    backend = create_backend("cuda", bundle, num_pages=pages, page_size=16)
    engine = Engine(backend, bundle.tokenizer, EngineConfig(max_batch=concurrency, num_pages=pages, page_size=16))
    engine.start()
    tok = bundle.tokenizer

    def prompt(i):
        text = PROMPTS[i % len(PROMPTS)] + " Answer in detail."
        return tok.encode(bundle.chat_template.render([{"role": "user", "content": text}], add_generation_prompt=True))

    async def one(i, stamps, counts):
        params = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=i)
        async for d in engine.submit(prompt(i), params):
            if d.token_ids:
                stamps[i].append(time.perf_counter())
                counts[i] += len(d.token_ids)

    try:
        warm = [[] for _ in range(8)]
        await asyncio.gather(*(one(i, warm, [0] * 8) for i in range(8)))
        stamps = [[] for _ in range(concurrency)]
        counts = [0] * concurrency
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, stamps, counts) for i in range(concurrency)))
        wall = time.perf_counter() - t0
    finally:
        await engine.stop()
    return summarize(stamps, t0, wall, sum(counts))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.7)
    args = ap.parse_args(argv)
    r = asyncio.run(run(args.concurrency, args.max_tokens, args.temperature))
    print(f"engine (CUDA backend, real weights): {r['requests']} concurrent streaming chat requests, "
          f"temperature {args.temperature}, max_tokens {args.max_tokens}: {r['tokens']} tokens in "
          f"{r['wall_s']:.2f} s = {r['tok_s']:.0f} tok/s aggregate; inter-token latency p50 "
          f"{r['itl_p50_ms']:.2f} ms, p99 {r['itl_p99_ms']:.2f} ms; TTFT p50 {r['ttft_p50_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
