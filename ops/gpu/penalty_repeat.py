"""Is "real penalties batched: overlap engine == classic engine" (ops/gpu/penalty_check.py, threshold 0.9) moved
by the sampling kernel? penalty_check's batched requests on the real model, ROUNDS times, with each sampling
kernel (AOTX_SAMPLE_SPLIT=0: sample_rows, 1: sample_rows_split) and each loop (classic, one step behind).
Printed: per round and kernel, overlap == classic (the check's fraction); classic with split == classic with
block, overlap with split == overlap with block (the kernels' ids in the engine); and each configuration's
outputs against its own first round (run-to-run: batching depends on timing only in the overlapped loop).

`python3 -m ops.gpu.penalty_repeat [rounds]` (needs the real GGUF; session 13's review).
"""
from __future__ import annotations

import asyncio
import os
import sys

ROUNDS = 2


def _same(a: list, b: list) -> str:
    return f"{sum(1 for x, y in zip(a, b) if x == y)}/{len(a)}"


def main(argv: list[str]) -> int:
    from kernels import load_model
    from ops.gpu import model_check, penalty_check

    rounds = int(argv[0]) if argv else ROUNDS
    bundle = load_model(progress=False)
    render = bundle.chat_template.render
    prompts = [bundle.tokenizer.encode(render([{"role": "user", "content": p}], add_generation_prompt=True))
               for p in model_check.PROMPTS]
    requests = penalty_check.requests_of(prompts)
    out: dict[tuple[str, bool], list] = {}
    for rnd in range(rounds):
        for split in ("0", "1"):
            os.environ["AOTX_SAMPLE_SPLIT"] = split   # read when the backend's Kernels object is built
            for overlap in (False, True):
                got = asyncio.run(penalty_check._outputs(bundle, requests, overlap))
                first = out.setdefault((split, overlap), got)
                print(f"round {rnd} split={split} overlap={overlap}: == round 0 {_same(got, first)}", flush=True)
                out[(split, overlap, rnd)] = got
        for split in ("0", "1"):
            print(f"round {rnd} split={split}: overlap == classic "
                  f"{_same(out[(split, True, rnd)], out[(split, False, rnd)])}", flush=True)
        for overlap in (False, True):
            print(f"round {rnd} overlap={overlap}: split == block "
                  f"{_same(out[('1', overlap, rnd)], out[('0', overlap, rnd)])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
