"""The token mask of one step: the bitmask of every sampled row whose request has a constraint.

A constrained row's matcher must have consumed every token sampled before this one. A token of the
step still on the device (the engine runs one step behind) is learnt late: the launcher calls the
``LateMask`` after it has enqueued this step's forward pass and before it enqueues the sampling
(kernels/cuda/overlap.py), so reading the step before's ids, feeding them to the matchers and filling
the masks happen on the host while the device runs the forward. Rows without a constraint are not in
the mask and cost nothing; a step without constrained rows has no mask at all (None).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aotx.engine.sequence import Sequence as Seq
from kernels.token_mask import TokenMask, mask_words


class MaskOutOfStep(RuntimeError):
    """A constrained row's matcher has not seen every token sampled before this step."""


class LateMask:
    """The mask of one launch, computed when the launcher calls it (see the module docstring)."""

    def __init__(self, sampled: Sequence[Seq], previous) -> None:
        self.rows = [j for j, seq in enumerate(sampled) if seq.matcher is not None]
        # (seq, the row of the previous launch's ids holding its pending token, or -1)
        self._seqs = [(sampled[j], sampled[j].pending_row if sampled[j].pending else -1) for j in self.rows]
        self._previous = previous     # the previous launch's handle (its ids()), when a token is pending

    def __call__(self) -> TokenMask:
        # llguidance is imported only once a request has a constraint: engine runs without one (the GPU
        # benches on an image that lacks the wheel) never load it
        from aotx.structured import batch

        ids = None
        fill, blank = [], []
        for k, (seq, row) in enumerate(self._seqs):
            known = len(seq.output_ids)
            if row >= 0:
                if self._previous is None:
                    raise MaskOutOfStep(f"sequence {seq.seq_id}: a pending token and no step to read it from")
                ids = self._previous.ids() if ids is None else ids
                ok = seq.matcher.sync(known, int(ids[row]))
                known += 1
            else:
                ok = not seq.matcher.failed
            if seq.matcher.consumed != known:
                raise MaskOutOfStep(f"sequence {seq.seq_id}: matcher at {seq.matcher.consumed} tokens, "
                                    f"output at {known}")
            # a refused token ends the request when its step is read back: its row here is never used
            (fill if ok else blank).append(k)
        vocab = max(int(seq.params.constraint.vocab_size) for seq, _ in self._seqs)
        bits = np.zeros((len(self._seqs), mask_words(vocab)), dtype=np.uint32)
        if fill:
            sub = np.ascontiguousarray(bits[fill]) if len(fill) < len(self._seqs) else bits
            batch.fill_rows([self._seqs[k][0].matcher for k in fill], sub)
            if sub is not bits:
                bits[fill] = sub
        bits[blank] = np.uint32(0xFFFFFFFF)
        return TokenMask(np.array(self.rows, dtype=np.int32), bits)


def step_mask(sampled: Sequence[Seq], previous=None) -> LateMask | None:
    """The launch's mask (called by the launcher), or None when no sampled row is constrained.
    `previous`: the handle of the launch before (for tokens still pending on the device)."""
    if not any(seq.matcher is not None for seq in sampled):
        return None
    return LateMask(sampled, previous)
