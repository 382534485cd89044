"""Penalties, logit_bias and min_p through the CUDA engine (gpu-check).

The one-step-behind loop launches step t+1 before the host has read step t's token; the sampling
kernel then counts that token from the step's token ids on the device (kernels/cuda/adjust_buffers.py).
Checked here: (1) the overlapped engine gives the classic engine's tokens on penalized requests
(greedy and seeded), exactly when each request runs alone (the same batches in both loops, so the
same arithmetic: only the counting of the unread token can differ); batched together, >= 0.9 of
requests identical (a request that batches differently may flip a near-tie under bf16, as
overlap_check's criterion; random weights have near-flat logits, so there it is information only:
10/14 on the H200 of 2026-12-01); (2) exact: logit_bias +100 on a token makes every
greedy output token that token, and -100 on the greedy first token changes it.
"""
from __future__ import annotations

import asyncio

from kernels import create_backend

PAGE = 16


class IdTokenizer:
    """What the engine needs of a tokenizer, for random weights (no vocabulary): ids as text."""

    def __init__(self, eos_id: int) -> None:
        self.eos_id = eos_id

    def token_bytes(self, token_id: int) -> bytes:
        return f"<{token_id}>".encode()

    def token_text(self, token_id: int) -> str:
        return f"<{token_id}>"


async def _outputs(bundle, requests, overlap: bool, one_at_a_time: bool = False):
    from aotx.engine import Engine, EngineConfig

    backend = create_backend("cuda", bundle, num_pages=1024, page_size=PAGE)
    tok = bundle.tokenizer or IdTokenizer(bundle.config.eos_id)
    engine = Engine(backend, tok, EngineConfig(max_batch=64, num_pages=1024, page_size=PAGE,
                                               prefill_token_budget=256, overlap=overlap))
    assert engine._one_behind is overlap
    engine.start()
    try:
        async def one(prompt, params):
            deltas = [d async for d in engine.submit(prompt, params)]
            return [t for d in deltas for t in d.token_ids]
        if one_at_a_time:
            return [await one(p, sp) for p, sp in requests]
        return await asyncio.gather(*(one(p, sp) for p, sp in requests))
    finally:
        await engine.stop()


FORCED = 1234   # the token logit_bias +100 forces


def requests_of(prompts) -> list:
    """(prompt ids, SamplingParams) of the check: four kinds cycled over the prompts, then a forced one and a
    plain greedy one on the first prompt (the last two)."""
    from aotx.engine import SamplingParams

    forced = FORCED
    requests = []
    for i, p in enumerate(prompts):
        kind = i % 4
        sp = (SamplingParams(max_tokens=40, temperature=0, frequency_penalty=1.5, presence_penalty=0.5) if kind == 0 else
              SamplingParams(max_tokens=30, temperature=0.8, top_p=0.95, seed=i, frequency_penalty=0.7,
                             presence_penalty=-0.3, min_p=0.05) if kind == 1 else
              SamplingParams(max_tokens=24, temperature=0.7, seed=i, min_p=0.1,
                             logit_bias=((int(p[0]), 5.0), (7, -100.0))) if kind == 2 else
              SamplingParams(max_tokens=12, temperature=0, frequency_penalty=2.0))
        requests.append((list(p), sp))
    requests.append((list(prompts[0]), SamplingParams(max_tokens=10, temperature=0, logit_bias=((forced, 100.0),))))
    requests.append((list(prompts[0]), SamplingParams(max_tokens=10, temperature=0)))
    return requests


def run(bundle, prompts, record, label: str = "") -> None:
    from aotx.engine import SamplingParams

    forced = FORCED
    requests = requests_of(prompts)
    alone_classic = asyncio.run(_outputs(bundle, requests, False, one_at_a_time=True))
    alone_behind = asyncio.run(_outputs(bundle, requests, True, one_at_a_time=True))
    same = sum(1 for a, b in zip(alone_classic, alone_behind) if a == b)
    record(f"{label}penalties one at a time: overlap engine == classic engine (fraction identical)",
           same / len(requests), 1.0, f"{same}/{len(requests)} identical")
    classic = asyncio.run(_outputs(bundle, requests, False))
    behind = asyncio.run(_outputs(bundle, requests, True))
    same = sum(1 for a, b in zip(classic, behind) if a == b)
    name = f"{label}penalties batched: overlap engine == classic engine (fraction identical)"
    if bundle.tokenizer is None:
        print(f"INFO {name}: {same}/{len(requests)} (random weights: near-flat logits, not a criterion)", flush=True)
    else:
        record(name, same / len(requests), 0.9, f"{same}/{len(requests)} identical")
    record(f"{label}logit_bias +100 forces the token (both loops)",
           float(all(t == forced for t in classic[-2] + behind[-2]) and len(classic[-2]) == 10), 1.0)
    plain = classic[-1]
    first = plain[0] if plain else 0
    banned = asyncio.run(_outputs(bundle, [(list(prompts[0]), SamplingParams(
        max_tokens=10, temperature=0, logit_bias=((first, -100.0),)))], True))[0]
    record(f"{label}logit_bias -100 on the greedy token changes it", float(bool(banned) and banned[0] != first), 1.0)
    print(f"  penalties: forced {classic[-2][:4]}..., plain first {first}, banned first {banned[:1]}", flush=True)
