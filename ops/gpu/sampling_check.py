"""The sampling checks of `make gpu-check`, once with each sampling kernel: sample_rows_split (a row over a
cluster of 8 blocks, sampling_split.cuh; AOTX_SAMPLE_SPLIT=1) and sample_rows (a block a row, AOTX_SAMPLE_SPLIT=0),
whatever the environment picks for the engine.

Each kernel runs kernel_check's sampling checks (greedy/temperature/top-k/top-p rows with ties, penalties
and logit_bias through adjust_rows' scratch rows with min_p, token masks copied and fused), then the shapes
the split kernel's slicing depends on: 1 and 256 rows of model-like logits in every mode, and vocabularies
that 8 blocks do not divide evenly (a last block short, blocks with no token at all), then
ops/gpu/sampling_adversarial.py's rows (full candidate lists, ties across slices, the 65,536-token bound) and
the same logits sampled 100 times. Every id is compared with kernels/sampler.py, exactly; the record names
start with the kernel's name.

`python3 -m ops.gpu.sampling_check` runs these alone.
"""
from __future__ import annotations

import numpy as np

from kernels import sampler
from kernels.sampling_rows import SamplingRows
from ops.gpu.kernel_check import V, Ctx, check_sampling, check_token_mask
from ops.gpu.sampling_adversarial import check_adversarial

KERNELS = (("split", True), ("block", False))   # name, Kernels.sample_split


def mixed_rows(c: Ctx, r: int) -> SamplingRows:
    """Every way of sampling, cycled over r rows: greedy, temperatures, top-p, top-k (1, 50, more than the
    candidates), min-p, and their combinations."""
    temps = np.array([0.0, 0.7, 1.0, 1.3, 0.7, 0.2, 2.0], np.float32)[np.arange(r) % 7]
    top_p = np.array([1.0, 0.9, 0.5, 0.95, 1.0, 0.3, 0.99, 0.8, 1.0, 1.0, 0.6], np.float32)[np.arange(r) % 11]
    top_k = np.array([0, 0, 50, 1, 5, 0, 1000, 40000, 0, 2], np.int32)[np.arange(r) % 10]
    min_p = np.array([0.0, 0.0, 0.05, 0.0, 0.1, 0.0, 0.0, 0.02, 0.0], np.float32)[np.arange(r) % 9]
    seed = c.rng.integers(0, 2 ** 63, r).astype(np.uint64)
    step = c.rng.integers(0, 1000, r).astype(np.int64)
    return SamplingRows(temps, top_p, top_k, seed, step, min_p)


def sample_compare(c: Ctx, logits: np.ndarray, rows: SamplingRows, name: str) -> None:
    """sample_rows (whichever kernel c.k.sample_split picks) on ``logits`` [R, vocab] == kernels/sampler.py."""
    r, vocab = logits.shape
    ref = sampler.sample(logits, rows)
    out = c.zeros(r * 4)
    c.k.sample(c.up(np.ascontiguousarray(logits)), c.up(np.arange(r, dtype=np.int32)), vocab,
               c.up(rows.temperature), c.up(rows.top_p), c.up(rows.top_k), c.up(rows.seed),
               c.up(np.asarray(rows.step).astype(np.uint64)), c.up(rows.min_p_array()),
               c.up(np.full(r, -1, np.int32)), 0, out, r)
    got = c.down(out, (r,), np.int32)
    mism = int((got != ref).sum())
    c.record(f"sample_rows {name} ({r} rows x {vocab})", float(mism), 0.0, f"mismatched rows={mism}")
    c.free()


def check_shapes(c: Ctx) -> None:
    from ops.gpu.sampling_bench import model_like_logits

    for r in (1, 256):
        sample_compare(c, model_like_logits(c.rng, r), mixed_rows(c, r), "model-like, every mode")
    for vocab in (50_001, 1_003, 9):   # 8 blocks: the last one short; tiny slices; 3 blocks with no token
        logits = (c.rng.standard_normal((64, vocab)) * 3).astype(np.float32)
        logits[1, : min(vocab, 5)] = logits[1].max() + 1.0     # ties at the top, across slices
        sample_compare(c, logits, mixed_rows(c, 64), "odd vocab, every mode")


def check_sampling_kernels(c: Ctx) -> None:
    """kernel_check's sampling checks, check_shapes and ops/gpu/sampling_adversarial.py's rows and repeats,
    with each kernel (the split one where the device has thread-block clusters)."""
    keep = c.k.sample_split, c.k.sample_split_rows
    c.k.sample_split_rows = 1 << 30              # (the kernel named, at every row count)
    try:
        for name, split in KERNELS:
            if split and "sample_rows_split" not in c.k.f:
                continue
            c.k.sample_split, c.tag = split, f"[{name}] "
            check_sampling(c)
            check_token_mask(c)
            check_shapes(c)
            check_adversarial(c)
    finally:
        (c.k.sample_split, c.k.sample_split_rows), c.tag = keep, ""


def main() -> int:
    import time

    t0 = time.time()
    c = Ctx()
    print(f"device {c.dev.name} {c.dev.arch} sms={c.dev.sm_count} V={V}", flush=True)
    check_sampling_kernels(c)
    return c.summary("sampling", t0)


if __name__ == "__main__":
    raise SystemExit(main())
