"""Numpy decode throughput over the paged pool: ``python -m tests.kernels.bench_decode``.

Set OPENBLAS_NUM_THREADS yourself (it is read when numpy loads). Each of B
sequences prefills a distinct prompt, then all decode ``--steps`` tokens
together, one forward per step; reports generated tokens per second.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from kernels import create_backend, load_model_cached
from tests.kernels.pager import Pager


def bench(backend, prompts: list[list[int]], steps: int) -> float:
    pager = Pager(backend.num_pages, backend.page_size)
    sids = [pager.new_seq() for _ in prompts]
    logits = backend.forward(pager.build(list(zip(sids, prompts))))
    nxt = logits.argmax(-1)
    t0 = time.perf_counter()
    for _ in range(steps):
        logits = backend.forward(pager.build([(s, [int(t)]) for s, t in zip(sids, nxt)]))
        nxt = logits.argmax(-1)
    return len(prompts) * steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    args = ap.parse_args()
    bundle = load_model_cached(progress=True)
    backend = create_backend("numpy", bundle, num_pages=1024, page_size=16)
    words = bundle.tokenizer.encode(" ".join(f"item {i} of the list" for i in range(400)))
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    for b in (int(x) for x in args.batches.split(",")):
        prompts = [words[i * 7: i * 7 + args.prompt_tokens] for i in range(b)]
        bench(backend, prompts, 2)  # warm-up
        tps = bench(backend, prompts, args.steps)
        print(f"batch {b:3d}: {tps:8.1f} tok/s  ({1000 * b / tps:6.1f} ms/step)")


if __name__ == "__main__":
    main()
