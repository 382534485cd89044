"""Counter-based sampling and logprobs: the specification every backend reproduces.

For each logits row ``l`` (float32 [V]) with parameters ``temperature t``,
``top_p``, ``top_k``, ``min_p``, ``seed``, ``step``:

0. Penalties and ``logit_bias`` (kernels/logit_adjust.py) are applied to the row
   first; ``l`` below (the "raw" logit) is the adjusted row, on every path.
1. ``t == 0`` (or ``t < 0``, or NaN): greedy, ``argmax(l)``, the lowest id on ties;
   NaN never wins (an all-NaN row gives 0).
2. Otherwise, weights. ``z = l * inv_t`` with ``inv_t = float32(1) / float32(t)``
   (float32 multiply), ``m = max(z)`` over the z that are not NaN, ``e = exp(z - m)``
   in float32 (``e`` in [0, 1]; the max gets exactly 1; a NaN e weighs 0). If ``m`` is
   not finite (every z NaN or -inf, or a z of +inf: a +inf logit, ``l * inv_t``
   overflowing float32, as every row does at ``t`` below about 3e-39 where ``inv_t`` is
   inf) no token would weigh anything: the row is sampled greedily (1.). Each
   token's integer weight is ``w = floor(e * 2**32)`` (uint64; exact: scaling by 2**32 is exact). Tokens
   with ``w == 0`` are dropped: they can never be drawn. ``min_p > 0``: tokens
   with ``w < ceil(min_p * 2**32)`` (min_p widened to float64) are dropped too,
   i.e. ``p < min_p * p_max`` (the max has ``e = 1``, so ``w / 2**32 = p / p_max``). No normalisation is
   ever done in floating point; renormalising is implicit in step 5.
3. Order: the remaining tokens sorted by RAW logit ``l`` descending, then id
   ascending. ``top_k > 0`` keeps the first ``top_k``.
4. Nucleus: with ``c_i`` the inclusive prefix sums of ``w`` in that order
   (exact uint64) and ``W = c_last``, let ``p24 = ceil(top_p * 2**24)``
   (top_p widened to float64) and keep the smallest prefix ``0..n`` with
   ``c_n * 2**24 >= p24 * W`` (so always at least one token; ``top_p >= 1``
   keeps all).
5. Draw. ``x = seed XOR (step * 0x9E3779B97F4A7C15 mod 2**64)``;
   ``r = splitmix64(x)`` where ``splitmix64(x)``: ``z = x + 0x9E3779B97F4A7C15;
   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
   return z ^ (z >> 31)`` (all mod 2**64). ``u24 = r >> 40`` (so ``u = u24 / 2**24``
   in [0, 1)). With ``W`` now the kept prefix's total, the token is the first one
   in the order whose ``c_i * 2**24 > u24 * W`` — i.e. cumulative probability
   exceeds ``u``.

Every step after ``exp`` is integer arithmetic (products fit in 128 bits; see
``_mul_shift24``), so two backends agree on the token whenever they agree on the
float32 ``e`` values, whatever their reduction order.

``logprobs``: ``log_softmax`` of the RAW logits (no temperature), float32,
``lp = l - (m + log(sum(exp(l - m))))``; top-``k`` sorted by logprob descending,
then id ascending.
"""
from __future__ import annotations

import numpy as np

from kernels import logit_adjust
from kernels.sampling_rows import SamplingRows

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
WEIGHT_BITS = 32
U_BITS = 24


def splitmix64(x: int) -> int:
    z = (x + GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def uniform24(seed: int, step: int) -> int:
    """The 24-bit uniform integer for (seed, step): ``u = uniform24 / 2**24``."""
    x = (int(seed) & MASK64) ^ ((int(step) * GOLDEN) & MASK64)
    return splitmix64(x) >> (64 - U_BITS)


def _mul_shift24(a: int, total: int, round_up: bool) -> int:
    """floor (or ceil) of ``a * total / 2**24``, exactly (Python ints; a kernel splits into 64-bit halves)."""
    num = a * total
    return -((-num) >> U_BITS) if round_up else num >> U_BITS


def min_weight(min_p: float) -> int:
    """The smallest integer weight a token keeps (1: only ``w == 0`` is dropped)."""
    if not min_p > 0.0:
        return 1
    return max(1, int(np.ceil(float(np.float32(min_p)) * float(1 << WEIGHT_BITS))))


def greedy_ids(logits: np.ndarray) -> np.ndarray:
    """int64 [R] of logits [R, V]: the lowest id among each row's largest non-NaN logits (-0 == +0), 0 where
    every logit is NaN (the kernels' rule: NaN never wins)."""
    lg = np.asarray(logits)
    lg2 = lg.reshape(-1, lg.shape[-1])
    ids = np.argmax(lg2, axis=-1)   # numpy's argmax: the first NaN where a row has one, else the rule
    nan = np.isnan(lg2[np.arange(len(ids)), ids])
    if nan.any():
        rows = lg2[nan]
        top = np.where(np.isnan(rows), -np.inf, rows).max(axis=-1, keepdims=True)
        ids[nan] = np.argmax(rows == top, axis=-1)   # (no True in a row: 0)
    return ids.reshape(lg.shape[:-1])


def _z_max(logits: np.ndarray, temperature: float) -> tuple[np.ndarray, np.float32]:
    """``z = l * inv_t`` (float32) and its max over the non-NaN z (NaN when every z is NaN)."""
    with np.errstate(over="ignore", invalid="ignore"):
        inv_t = np.float32(1.0) / np.float32(temperature)
        z = logits.astype(np.float32) * inv_t
    return z, np.fmax.reduce(z)


def _weights(z: np.ndarray, m: np.float32, min_p: float) -> np.ndarray:
    """The integer weights for a finite max ``m`` (a NaN z weighs 0)."""
    with np.errstate(invalid="ignore"):
        e = np.exp(z - m)
    e[np.isnan(e)] = 0.0
    w = (e.astype(np.float64) * float(1 << WEIGHT_BITS)).astype(np.uint64)
    if min_p > 0.0:
        w[w < np.uint64(min_weight(min_p))] = 0
    return w


def _sorted_prefix(logits: np.ndarray, ids: np.ndarray, m: int) -> np.ndarray:
    """An exact prefix (length >= min(m, len(ids))) of ``ids`` sorted by logit desc, id asc."""
    if m < len(ids):
        lv = logits[ids]
        thr = np.partition(lv, len(lv) - m)[len(lv) - m]
        ids = ids[lv >= thr]  # every id tied with the m-th largest is kept: the prefix is exact
    return ids[np.lexsort((ids, -logits[ids]))]


def sample_row(logits: np.ndarray, temperature: float, top_p: float, top_k: int,
               seed: int, step: int, min_p: float = 0.0) -> int:
    """The token chosen for one row (see the module docstring).

    Only as much of the sorted order as the answer needs is sorted: a prefix of
    256 tokens, then 8x larger ones (the result is the same as a full sort).
    """
    if not temperature > 0.0:
        return int(greedy_ids(logits))
    z, m = _z_max(logits, temperature)
    if not np.isfinite(m):   # no token weighs anything
        return int(greedy_ids(logits))
    w = _weights(z, m, min_p)
    ids = np.nonzero(w)[0]
    u24 = uniform24(seed, step)
    if top_k > 0:
        ids = _sorted_prefix(logits, ids, top_k)[:top_k]
    total = int(w[ids].sum(dtype=np.uint64))
    need = _mul_shift24(int(np.ceil(float(top_p) * (1 << U_BITS))), total, True) if top_p < 1.0 else None
    m = 256
    while True:
        order = _sorted_prefix(logits, ids, m) if top_k <= 0 else ids
        cum = np.cumsum(w[order], dtype=np.uint64)
        complete = len(order) == len(ids)
        if need is not None and (int(cum[-1]) >= need or complete):
            n = int(np.searchsorted(cum, np.uint64(need), side="left"))  # c_n >= need
            cum = cum[: n + 1]
            below = _mul_shift24(u24, int(cum[-1]), round_up=False)
            return int(order[int(np.searchsorted(cum, np.uint64(below), side="right"))])
        if need is None:
            below = _mul_shift24(u24, total, round_up=False)
            if int(cum[-1]) > below or complete:
                return int(order[int(np.searchsorted(cum, np.uint64(below), side="right"))])
        m *= 8


def sample_row_full_sort(logits: np.ndarray, temperature: float, top_p: float, top_k: int,
                         seed: int, step: int, min_p: float = 0.0) -> int:
    """``sample_row`` written straight from the specification (full sort); tests compare the two."""
    if not temperature > 0.0:
        return int(greedy_ids(logits))
    with np.errstate(over="ignore", invalid="ignore"):
        z = logits.astype(np.float32) * (np.float32(1.0) / np.float32(temperature))
        m = np.fmax.reduce(z)
        if not np.isfinite(m):
            return int(greedy_ids(logits))
        e = np.exp(z - m)
    w = (np.where(np.isnan(e), 0.0, e).astype(np.float64) * float(1 << WEIGHT_BITS)).astype(np.uint64)
    w[w < np.uint64(min_weight(min_p))] = 0
    ids = np.nonzero(w)[0]
    order = ids[np.lexsort((ids, -logits[ids]))]
    if top_k > 0:
        order = order[:top_k]
    cum = np.cumsum(w[order], dtype=np.uint64)
    if top_p < 1.0:
        need = _mul_shift24(int(np.ceil(float(top_p) * (1 << U_BITS))), int(cum[-1]), True)
        cum = cum[: int(np.searchsorted(cum, np.uint64(need), side="left")) + 1]
    below = _mul_shift24(uniform24(seed, step), int(cum[-1]), round_up=False)
    return int(order[int(np.searchsorted(cum, np.uint64(below), side="right"))])


def sample(logits: np.ndarray, rows: SamplingRows) -> np.ndarray:
    """int32 [R]: one token per logits row, per ``rows`` (see the module docstring); ``rows.adjust``
    must have no pending tokens (``LogitAdjust.resolved``)."""
    logits = logit_adjust.apply(logits, rows.adjust)
    r_count = logits.shape[0]
    out = np.empty(r_count, dtype=np.int32)
    greedy = ~(np.asarray(rows.temperature) > 0)
    if greedy.any():
        out[greedy] = greedy_ids(logits[greedy])
    for r in np.nonzero(~greedy)[0]:
        out[r] = sample_row(logits[r], float(rows.temperature[r]), float(rows.top_p[r]),
                            int(rows.top_k[r]), int(rows.seed[r]), int(rows.step[r]), rows.min_p_of(r))
    return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """float32 [R, V]: ``l - (m + log(sum(exp(l - m))))`` per row."""
    m = logits.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
    return (logits - lse).astype(np.float32)


def _top_sorted(lp: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k largest values of lp (desc), ties by id asc."""
    thr = np.partition(lp, lp.shape[0] - k)[lp.shape[0] - k]
    cand = np.nonzero(lp >= thr)[0]
    return cand[np.lexsort((cand, -lp[cand]))][:k]


def logprobs(logits: np.ndarray, chosen: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(chosen_lp float32[R], top_ids int32[R, k], top_lp float32[R, k])`` from the raw logits."""
    lp = log_softmax(np.asarray(logits, dtype=np.float32))
    r_count, vocab = lp.shape
    chosen = np.asarray(chosen, dtype=np.int64)
    chosen_lp = lp[np.arange(r_count), chosen].astype(np.float32)
    k = max(0, min(int(k), vocab))
    top_ids = np.empty((r_count, k), dtype=np.int32)
    top_lp = np.empty((r_count, k), dtype=np.float32)
    if k:
        for r in range(r_count):
            ids = _top_sorted(lp[r], k)
            top_ids[r] = ids
            top_lp[r] = lp[r, ids]
    return chosen_lp, top_ids, top_lp
