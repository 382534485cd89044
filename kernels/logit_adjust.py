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
        return cls.from_arrays(
            [p[0] for p in per_row], [p[1] for p in per_row], [p[2] for p in per_row],
            [np.fromiter(p[3].keys(), np.int32, len(p[3])) for p in per_row],
            [np.fromiter((c for c, _ in p[3].values()), np.int32, len(p[3])) for p in per_row],
            [np.fromiter((b for _, b in p[3].values()), np.float32, len(p[3])) for p in per_row],
            [p[4] for p in per_row])

    @classmethod
    def from_arrays(cls, rows, presence, frequency, tokens: list[np.ndarray], counts: list[np.ndarray],
                    biases: list[np.ndarray], pending) -> LogitAdjust:
        """One row's entries per list element (distinct tokens within a row)."""
        offsets = np.zeros(len(tokens) + 1, dtype=np.int32)
        np.cumsum([len(t) for t in tokens], out=offsets[1:])

        def cat(parts, dt):
            return np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)
        return cls(rows=np.asarray(rows, dtype=np.int32), offsets=offsets, token=cat(tokens, np.int32),
                   count=cat(counts, np.int32), bias=cat(biases, np.float32),
                   presence=np.asarray(presence, dtype=np.float32), frequency=np.asarray(frequency, dtype=np.float32),
                   pending=np.asarray(pending, dtype=np.int32))

    def resolved(self, token_ids: np.ndarray) -> LogitAdjust:
        """The same adjustment with every pending token folded into the entries (``token_ids``: the
        step's token ids, placeholders resolved)."""
        has = np.nonzero(self.pending >= 0)[0]
        if not len(has):
            return self
        count = self.count.copy()
        missing_rows, missing_tokens = [], []
        for a in has.tolist():
            t = int(token_ids[int(self.pending[a])])
            lo, hi = int(self.offsets[a]), int(self.offsets[a + 1])
            hit = np.nonzero(self.token[lo:hi] == t)[0]
            if len(hit):
                count[lo + int(hit[0])] += 1
            else:
                missing_rows.append(a)
                missing_tokens.append(t)
        token, bias, offsets = self.token, self.bias, self.offsets
        if missing_rows:
            at = offsets[np.array(missing_rows) + 1]            # each at the end of its row
            token = np.insert(token, at, np.array(missing_tokens, dtype=np.int32))
            count = np.insert(count, at, 1)
            bias = np.insert(bias, at, np.float32(0))
            added = np.zeros(len(offsets), dtype=np.int32)
            added[np.array(missing_rows) + 1] = 1
            offsets = offsets + np.cumsum(added, dtype=np.int32)
        return LogitAdjust(self.rows, offsets.astype(np.int32), token.astype(np.int32), count.astype(np.int32),
                           bias.astype(np.float32), self.presence, self.frequency,
                           np.full(len(self.rows), -1, dtype=np.int32))


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
