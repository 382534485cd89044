"""The token mask of one step: the bitmask of every sampled row whose request has a constraint.

A constrained row's matcher must have consumed every token sampled before this one. A token of the
step still on the device (the engine runs one step behind) is learnt late: the launcher calls the
``LateMask`` after it has enqueued this step's forward pass and before it enqueues the sampling
(kernels/cuda/overlap.py), so reading the step before's ids, feeding them to the matchers and filling
the masks happen on the host while the device runs the forward. Rows without a constraint are not in
the mask and cost nothing; a step without constrained rows has no mask at all (None).

Most rows' masks are ready before that: aotx.engine.mask_prefetch fills them on a worker thread from
the moment the step before is launched; the late mask copies those rows and fills only the others.
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

    def __init__(self, sampled: Sequence[Seq], previous, prefetched=None) -> None:
        self.rows = [j for j, seq in enumerate(sampled) if seq.matcher is not None]
        # (seq, the row of the previous launch's ids holding its pending token, or -1)
        self._seqs = [(sampled[j], sampled[j].pending_row if sampled[j].pending else -1) for j in self.rows]
        self._previous = previous     # the previous launch's handle (its ids()), when a token is pending
        self._prefetched = prefetched  # aotx.engine.mask_prefetch.Prefetched: rows filled already, or None
        self.reused = 0               # rows taken from it (tests, benches)

    def __call__(self) -> TokenMask:
        # llguidance is imported only once a request has a constraint: engine runs without one (the GPU
        # benches on an image that lacks the wheel) never load it
        from aotx.structured import batch

        if self._prefetched is not None:
            self._prefetched.wait()     # its worker is done with the matchers
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
        bits = self._reuse(fill, vocab)
        if bits is None:
            bits = np.empty((len(self._seqs), mask_words(vocab)), dtype=np.uint32)
            fill = self._copy_prefetched(fill, bits, vocab)
        else:
            fill = []
        if fill:
            sub = np.ascontiguousarray(bits[fill]) if len(fill) < len(self._seqs) else bits
            batch.fill_rows([self._seqs[k][0].matcher for k in fill], sub)
            if sub is not bits:
                bits[fill] = sub
        bits[blank] = np.uint32(0xFFFFFFFF)
        return TokenMask(np.array(self.rows, dtype=np.int32), bits)

    def _reuse(self, fill: list[int], vocab: int) -> np.ndarray | None:
        """The prefetched bits as they are, when they hold exactly this mask's rows in its order (the
        steady state of a batch: the same rows, step after step)."""
        pre = self._prefetched
        if pre is None or pre.vocab != vocab or pre.bits is None or len(fill) != len(self._seqs):
            return None
        if len(pre.bits) != len(self._seqs) or any(pre.row(seq) != k for k, (seq, _) in enumerate(self._seqs)):
            return None
        self.reused = len(self._seqs)
        return pre.bits

    def _copy_prefetched(self, fill: list[int], bits: np.ndarray, vocab: int) -> list[int]:
        """Rows of `fill` found prefetched are copied into `bits`; the ones left to fill now."""
        pre = self._prefetched
        if pre is None or pre.vocab != vocab:
            return fill
        left, dst, src = [], [], []
        for k in fill:
            r = pre.row(self._seqs[k][0])
            if r < 0:
                left.append(k)
            else:
                dst.append(k)
                src.append(r)
        if dst:
            bits[dst] = pre.bits[src]
            self.reused = len(dst)
        return left


def step_mask(sampled: Sequence[Seq], previous=None, prefetched=None) -> LateMask | None:
    """The launch's mask (called by the launcher), or None when no sampled row is constrained.
    `previous`: the handle of the launch before (for tokens still pending on the device);
    `prefetched`: the rows aotx.engine.mask_prefetch filled already."""
    if not any(seq.matcher is not None for seq in sampled):
        return None
    return LateMask(sampled, previous, prefetched)
