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


def _counts(seq: Sequence) -> dict[int, int]:
    """The sequence's output-token counts, brought up to date with the ids the host has read."""
    counts = seq.counts
    for t in seq.output_ids[seq.counted:]:
        counts[t] = counts.get(t, 0) + 1
    seq.counted = len(seq.output_ids)
    return counts


def _entries(seq: Sequence) -> dict[int, tuple[int, float]]:
    p = seq.params
    entries: dict[int, tuple[int, float]] = {}
    if _penalized(seq):
        entries = {t: (c, 0.0) for t, c in _counts(seq).items()}
    for t, b in p.logit_bias:
        entries[t] = (entries.get(t, (0, 0.0))[0], float(b))
    return entries


def sampling_rows(seqs: list[Sequence], pending_token: dict[int, int]) -> SamplingRows:
    """``pending_token``: seq_id -> index in the step's token ids of its output token still on the device."""
    adjusted = []
    for i, q in enumerate(seqs):
        if q.params.logit_bias or _penalized(q):
            pending = pending_token.get(q.seq_id, -1) if _penalized(q) else -1
            adjusted.append((i, float(q.params.presence_penalty), float(q.params.frequency_penalty),
                             _entries(q), pending))
    min_p = [q.params.min_p for q in seqs]
    return SamplingRows(
        temperature=np.array([q.params.temperature for q in seqs], dtype=np.float32),
        top_p=np.array([q.params.top_p for q in seqs], dtype=np.float32),
        top_k=np.array([q.params.top_k for q in seqs], dtype=np.int32),
        seed=np.array([q.seed for q in seqs], dtype=np.uint64),
        step=np.array([q.sampled for q in seqs], dtype=np.int64),
        min_p=np.array(min_p, dtype=np.float32) if any(min_p) else None,
        adjust=LogitAdjust.build(adjusted) if adjusted else None,
    )
