"""One step's per-row sampling parameters (kernels.SamplingRows) from its sampled sequences.

Penalties count the output tokens of the answer so far. In the one-step-behind loop the host has
not read the token sampled by the step in flight when it launches the next one; that token is the
row's own input token of this step (a placeholder the device fills), so the row names it by its
index in the step's token ids (``LogitAdjust.pending``) and the sampler counts it there: on the
device for CUDA, from the resolved batch on the host otherwise. Rows with no penalty and no bias
are not in the adjustment at all; a step where no row has any builds none.
"""
from __future__ import annotations

import numpy as np

from aotx.engine.sequence import Sequence
from kernels.logit_adjust import LogitAdjust
from kernels.sampling_rows import SamplingRows


def _penalized(seq: Sequence) -> bool:
    p = seq.params
    return bool(p.presence_penalty or p.frequency_penalty)


class RowEntries:
    """One sequence's entries, kept up to date as its output grows (O(new tokens) per step): its
    bias keys (count 0 until generated), then each further output token once, with its count."""

    def __init__(self, logit_bias: tuple[tuple[int, float], ...]) -> None:
        n = max(16, 2 * len(logit_bias))
        self.token = np.zeros(n, np.int32)
        self.count = np.zeros(n, np.int32)
        self.bias = np.zeros(n, np.float32)
        self.index: dict[int, int] = {}
        self.n = 0
        self.counted = 0
        for t, b in logit_bias:
            self._slot(int(t))
            self.bias[self.index[int(t)]] = b

    def _slot(self, t: int) -> int:
        i = self.index.get(t)
        if i is None:
            if self.n == len(self.token):
                for name in ("token", "count", "bias"):
                    a = getattr(self, name)
                    setattr(self, name, np.concatenate([a, np.zeros_like(a)]))
            i = self.index[t] = self.n
            self.token[i] = t
            self.n += 1
        return i

    def update(self, output_ids: list[int], counting: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if counting:
            for t in output_ids[self.counted:]:
                i = self._slot(int(t))        # may grow the arrays: index them after
                self.count[i] += 1
            self.counted = len(output_ids)
        n = self.n
        return self.token[:n], self.count[:n], self.bias[:n]


def _entries(seq: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if seq.entries is None:
        seq.entries = RowEntries(seq.params.logit_bias)
    return seq.entries.update(seq.output_ids, _penalized(seq))


class RowsCache:
    """The last step's per-sequence constants (temperature, top_p, top_k, seed, min_p and which rows
    adjust their logits): a step that samples the same sequences in the same order (a steady decode
    batch) reuses them and computes only the step indexes (and the adjustment, where a row has one)."""

    def __init__(self) -> None:
        self.seqs: list[Sequence] | None = None
        self.rows: SamplingRows | None = None
        self.adjusted: list[tuple[int, Sequence]] = []
        self.last_step: np.ndarray | None = None   # each row's max_tokens - 1 (= its step + its `left`)


def sampling_rows(seqs: list[Sequence], pending_token, cache: RowsCache | None = None,
                  left: np.ndarray | None = None) -> SamplingRows:
    """``pending_token``: seq_id -> index in the step's token ids of its output token still on the device
    (a mapping with ``get``). ``left`` (or None): each row's tokens left to sample after this step
    (max_tokens - sampled - 1, as the runner's steady batch carries it); on a cache hit whose step before
    had it too, the step indexes are (max_tokens - 1) - left, no row looked at.
    The arrays of a cache hit are shared with the step before: readers must not write them."""
    hit = cache is not None and cache.rows is not None and cache.seqs == seqs   # (identity: eq=False)
    if hit and left is not None and cache.last_step is not None:
        base = cache.rows
        step = cache.last_step - left
        if not cache.adjusted:
            return SamplingRows(temperature=base.temperature, top_p=base.top_p, top_k=base.top_k, seed=base.seed,
                                step=step, min_p=base.min_p, adjust=None)
    else:
        step = np.array([len(q.output_ids) + q.pending for q in seqs], dtype=np.int64)   # q.sampled
    if cache is not None:
        cache.last_step = step + left if left is not None else None
    if hit:
        base, adjusted = cache.rows, cache.adjusted
    else:
        adjusted = [(i, q) for i, q in enumerate(seqs) if q.params.logit_bias or _penalized(q)]
        min_p = [q.params.min_p for q in seqs]
        base = SamplingRows(
            temperature=np.array([q.params.temperature for q in seqs], dtype=np.float32),
            top_p=np.array([q.params.top_p for q in seqs], dtype=np.float32),
            top_k=np.array([q.params.top_k for q in seqs], dtype=np.int32),
            seed=np.array([q.seed for q in seqs], dtype=np.uint64),
            step=_NO_STEPS,
            min_p=np.array(min_p, dtype=np.float32) if any(min_p) else None,
        )
        if cache is not None:
            cache.seqs, cache.rows, cache.adjusted = list(seqs), base, adjusted
    adjust = None
    if adjusted:
        entries = [_entries(q) for _, q in adjusted]
        adjust = LogitAdjust.from_arrays(
            [i for i, _ in adjusted], [q.params.presence_penalty for _, q in adjusted],
            [q.params.frequency_penalty for _, q in adjusted], [e[0] for e in entries], [e[1] for e in entries],
            [e[2] for e in entries],
            [pending_token.get(q.seq_id, -1) if _penalized(q) else -1 for _, q in adjusted])
    return SamplingRows(
        temperature=base.temperature, top_p=base.top_p, top_k=base.top_k, seed=base.seed,
        step=step,
        min_p=base.min_p, adjust=adjust,
    )


_NO_STEPS = np.empty(0, dtype=np.int64)
