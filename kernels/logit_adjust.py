"""Sparse per-row logit adjustments: OpenAI presence/frequency penalties and logit_bias.

For a row with ``presence``, ``frequency`` and entries ``(token, count, bias)`` (distinct tokens; a
token's ``count`` is how often it occurs among the output tokens of this answer that the host knows),
the row's logits become, for each entry's token (float32, in this order, no fused multiply-add)::

    c   = count (+1 when the row's pending token is this token)
    pen = frequency * c + (presence if c > 0 else 0)
    l'  = l + (bias - pen)

``pending`` (one-step-behind loop): the host learns step t's token only after step t+1 is launched,
so a row may name ONE more output token by its index in the step's token ids (the row's own input
token, which the device already holds); it counts once more. If that token is no entry, it is
adjusted as an entry ``(token, 0, 0.0)`` would be. ``-1``: none. Rows without any adjustment are
simply absent (they pay nothing). The CUDA twin is ``adjust_rows`` in kernels/cuda/sampling.cu.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LogitAdjust:
    rows: np.ndarray        # int32 [A]: the sampling rows adjusted (indices into SamplingRows), ascending
    offsets: np.ndarray     # int32 [A + 1]: row a's entries are [offsets[a], offsets[a + 1])
    token: np.ndarray       # int32 [N]
    count: np.ndarray       # int32 [N]
    bias: np.ndarray        # float32 [N]
    presence: np.ndarray    # float32 [A]
    frequency: np.ndarray   # float32 [A]
    pending: np.ndarray     # int32 [A]: index into the step's token ids of one more output token, or -1

    @classmethod
    def build(cls, per_row: list[tuple[int, float, float, dict[int, tuple[int, float]], int]]) -> LogitAdjust:
        """From ``(row, presence, frequency, {token: (count, bias)}, pending)`` per adjusted row."""
        offsets = np.zeros(len(per_row) + 1, dtype=np.int32)
        toks: list[int] = []
        counts: list[int] = []
        biases: list[float] = []
        for a, (_, _, _, entries, _) in enumerate(per_row):
            for t, (c, b) in entries.items():
                toks.append(t)
                counts.append(c)
                biases.append(b)
            offsets[a + 1] = len(toks)
        return cls(rows=np.array([p[0] for p in per_row], dtype=np.int32), offsets=offsets,
                   token=np.array(toks, dtype=np.int32), count=np.array(counts, dtype=np.int32),
                   bias=np.array(biases, dtype=np.float32),
                   presence=np.array([p[1] for p in per_row], dtype=np.float32),
                   frequency=np.array([p[2] for p in per_row], dtype=np.float32),
                   pending=np.array([p[4] for p in per_row], dtype=np.int32))

    def resolved(self, token_ids: np.ndarray) -> LogitAdjust:
        """The same adjustment with every pending token folded into the entries (``token_ids``: the
        step's token ids, placeholders resolved)."""
        if not (self.pending >= 0).any():
            return self
        per_row = []
        for a in range(len(self.rows)):
            lo, hi = int(self.offsets[a]), int(self.offsets[a + 1])
            entries = {int(t): (int(c), float(b)) for t, c, b in
                       zip(self.token[lo:hi], self.count[lo:hi], self.bias[lo:hi])}
            if self.pending[a] >= 0:
                t = int(token_ids[int(self.pending[a])])
                c, b = entries.get(t, (0, 0.0))
                entries[t] = (c + 1, b)
            per_row.append((int(self.rows[a]), float(self.presence[a]), float(self.frequency[a]), entries, -1))
        return LogitAdjust.build(per_row)


def adjusted_logits(row: np.ndarray, presence: float, frequency: float, token: np.ndarray,
                    count: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """float32 [V]: ``row`` with the formula of the module docstring applied (entries resolved)."""
    out = np.array(row, dtype=np.float32, copy=True)
    if len(token):
        c = np.asarray(count).astype(np.float32)
        pen = np.float32(frequency) * c + np.where(c > 0, np.float32(presence), np.float32(0)).astype(np.float32)
        out[token] = out[token] + (np.asarray(bias, dtype=np.float32) - pen.astype(np.float32))
    return out


def apply(logits: np.ndarray, adjust: LogitAdjust | None) -> np.ndarray:
    """float32 [R, V]: the logits every backend samples from (a copy only where rows are adjusted)."""
    if adjust is None or not len(adjust.rows):
        return logits
    if (adjust.pending >= 0).any():
        raise ValueError("pending output tokens must be resolved (LogitAdjust.resolved) before a host sample")
    out = np.array(logits, dtype=np.float32, copy=True)
    for a, r in enumerate(adjust.rows.tolist()):
        lo, hi = int(adjust.offsets[a]), int(adjust.offsets[a + 1])
        out[r] = adjusted_logits(out[r], float(adjust.presence[a]), float(adjust.frequency[a]),
                                 adjust.token[lo:hi], adjust.count[lo:hi], adjust.bias[lo:hi])
    return out
