"""Adversarial sampling rows and repeated launches, for each sampling kernel (ops/gpu/sampling_check.py).

Written for the review of sample_rows_split (kernels/cuda/sampling_split.cuh, session 13): the inputs where a
row split over a cluster of 8 blocks could go wrong, each compared with kernels/sampler.py exactly:

* every token a candidate (all-equal logits, t = 2, min_p 0): each block's compact list full (n = S);
* the vocabulary at the split kernel's shared-memory bound (65,536 tokens: 8,192 a block, 96 KiB), one that
  8 x 512 does not divide, and one of 9 tokens (blocks with no token);
* ties of the top logit on both sides of every slice boundary, and between the first and the last token;
* a single candidate in the last slice (the single-candidate exchange at the first pass);
* top_k = vocab, vocab - 1, 1 and 2^31 - 1, top_p 0 (the first token only), min_p 1 (only e == 1 kept),
  greedy rows among sampled ones in one launch.

And the same logits sampled again and again (with and without programmatic dependent launch, so the next
launch's blocks start while the last ones run): the ids identical every time.

NaN logits among finite ones (a NaN weighs 0 and never wins), with each kernel; rows with no candidate at all
(t = 1e-40: 1/t overflows; +inf logits; every logit -inf or NaN), which the specification samples greedily
(kernels/sampler.py 2.), with each kernel (sample_rows takes greedy_row there since session 14).
"""
from __future__ import annotations

import numpy as np

from kernels import sampler
from kernels.sampling_rows import SamplingRows
from ops.gpu.kernel_check import Ctx

PARAMS = ((0.0, 1.0, 0, 0.0), (2.0, 1.0, 0, 0.0), (0.7, 0.5, 0, 0.0), (1.0, 0.0, 0, 0.0), (1.0, 1.0, -1, 0.0),
          (1.0, 1.0, -2, 0.0), (1.0, 0.9, 1, 0.0), (1.0, 1.0, 2 ** 31 - 1, 0.0), (1.0, 1.0, 0, 1.0),
          (1.3, 0.95, 50, 0.05))   # t, top_p, top_k (-1: vocab, -2: vocab - 1), min_p
REPEATS = 100


def patterns(rng: np.random.Generator, vocab: int) -> list[np.ndarray]:
    s = -(-vocab // 8)   # sample_split.SPLIT_C blocks a row: block c owns [c*s, c*s + s)
    equal = np.full(vocab, 0.5, np.float32)
    bounds = (rng.standard_normal(vocab) * 3).astype(np.float32)
    for c in range(1, 8):
        if c * s < vocab:
            bounds[c * s - 1] = bounds[c * s] = 20.0
    last = np.full(vocab, -np.inf, np.float32)
    last[vocab - 1] = 1.0
    few = np.round(rng.standard_normal(vocab)).astype(np.float32)
    ends = np.full(vocab, -np.inf, np.float32)
    ends[0] = ends[vocab - 1] = 3.0
    return [equal, bounds, last, few, ends]


def adversarial_rows(c: Ctx, vocab: int) -> tuple[np.ndarray, SamplingRows]:
    """Every pattern with every parameter set: [len(patterns) * len(PARAMS), vocab]."""
    rows = [(p, prm) for p in patterns(c.rng, vocab) for prm in PARAMS]
    logits = np.stack([p for p, _ in rows])
    t, top_p, k, mp = (np.array([prm[i] for _, prm in rows]) for i in range(4))
    k = np.where(k == -1, vocab, np.where(k == -2, vocab - 1, k)).astype(np.int32)
    n = len(rows)
    return logits, SamplingRows(t.astype(np.float32), top_p.astype(np.float32), k,
                                c.rng.integers(0, 2 ** 63, n).astype(np.uint64),
                                c.rng.integers(0, 1000, n).astype(np.int64), mp.astype(np.float32))


def upload_params(c: Ctx, rows: SamplingRows) -> tuple:
    """sample's arguments from temperature to scratch (no adjusted row)."""
    return (c.up(rows.temperature), c.up(rows.top_p), c.up(rows.top_k), c.up(rows.seed),
            c.up(np.asarray(rows.step).astype(np.uint64)), c.up(rows.min_p_array()),
            c.up(np.full(len(rows.temperature), -1, np.int32)), 0)


def check_repeats(c: Ctx, logits: np.ndarray, rows: SamplingRows, name: str) -> None:
    """REPEATS launches on the same device buffers (half with PDL): every launch's ids == the first's ==
    kernels/sampler.py."""
    r, vocab = logits.shape
    ref = sampler.sample(logits, rows)
    lg, rows_p, args = c.up(np.ascontiguousarray(logits)), c.up(np.arange(r, dtype=np.int32)), upload_params(c, rows)
    outs = [c.zeros(r * 4) for _ in range(REPEATS)]   # (every copy queued before the first launch)
    keep = c.k.pdl
    try:
        for i, out in enumerate(outs):
            c.k.pdl = i % 2 == 1
            c.k.sample(lg, rows_p, vocab, *args, out, r)
    finally:
        c.k.pdl = keep
    got = np.stack([c.down(out, (r,), np.int32) for out in outs])
    differ = int((got != got[0]).any(axis=1).sum())
    wrong = int((got[0] != ref).sum())
    c.record(f"sample_rows {name} x{REPEATS} ({r} rows x {vocab}): launches unlike the first", float(differ), 0.0,
             f"differing launches={differ}, mismatched rows={wrong}")
    c.record(f"sample_rows {name} x{REPEATS} ({r} rows x {vocab}): == sampler", float(wrong), 0.0)
    c.free()


def nonfinite_rows(c: Ctx, vocab: int, no_candidate: bool) -> tuple[np.ndarray, SamplingRows]:
    """NaN among finite logits (no_candidate False), or rows where no token weighs anything (True), each with
    greedy, plain, top-p / top-k / min-p parameters."""
    base = (c.rng.standard_normal(vocab) * 2.0).astype(np.float32)
    base[c.rng.choice(vocab, min(vocab, 12), replace=False)] += 8.0     # model-like: a few tokens well above
    if no_candidate:
        pos_inf, neg, nan_neg = base.copy(), np.full(vocab, -np.inf, np.float32), np.full(vocab, -np.inf, np.float32)
        pos_inf[[7, vocab - 3]] = np.inf      # in the first and the last block: the lowest id wins
        nan_neg[[1, vocab // 2]] = np.nan
        pats = [(base, 1e-40), (pos_inf, 0.7), (neg, 0.7), (nan_neg, 1.0), (np.full(vocab, np.nan, np.float32), 1.0)]
    else:
        nan = base.copy()
        nan[c.rng.choice(vocab, min(vocab // 2, 100), replace=False)] = np.nan
        nan[int(np.argmax(base))] = np.nan    # the top token too
        pats = [(nan, 0.7), (nan, 1.3)]
    prms = ((None, 1.0, 0, 0.0), (1, 1.0, 0, 0.0), (1, 0.9, 0, 0.0), (1, 0.95, 50, 0.1))   # None: t = 0 (greedy)
    rows = [(lg, 0.0 if prm[0] is None else t, prm) for lg, t in pats for prm in prms]
    n = len(rows)
    return np.stack([lg for lg, _, _ in rows]), SamplingRows(
        np.array([t for _, t, _ in rows], np.float32), np.array([p[1] for _, _, p in rows], np.float32),
        np.array([p[2] for _, _, p in rows], np.int32), c.rng.integers(0, 2 ** 63, n).astype(np.uint64),
        c.rng.integers(0, 1000, n).astype(np.int64), np.array([p[3] for _, _, p in rows], np.float32))


def check_adversarial(c: Ctx) -> None:
    """The adversarial rows at four vocabularies (each launch == kernels/sampler.py), then the repeats."""
    from ops.gpu.sampling_bench import model_like_logits
    from ops.gpu.sampling_check import mixed_rows, sample_compare

    for vocab in (65_536, 50_001, 4_097, 9):
        logits, rows = adversarial_rows(c, vocab)
        sample_compare(c, logits, rows, "adversarial")
    check_repeats(c, model_like_logits(c.rng, 64), mixed_rows(c, 64), "model-like, every mode")
    logits, rows = adversarial_rows(c, 50_001)
    check_repeats(c, logits, rows, "adversarial")
    for vocab in (50_001, 9):
        logits, rows = nonfinite_rows(c, vocab, False)
        sample_compare(c, logits, rows, "NaN logits")
        logits, rows = nonfinite_rows(c, vocab, True)
        sample_compare(c, logits, rows, "no candidate: greedy")
