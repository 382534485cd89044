"""The token mask of one step: the bitmask of every sampled row whose request has a constraint.

A constrained row's matcher must have consumed every token sampled before this one; the engine
keeps that true by reading a step with a constrained row back before launching the next (the
classic loop for that step: aotx.engine.engine). Rows without a constraint are not in the mask
and cost nothing; a step without constrained rows has no mask at all (None).
"""
# ops.bench.structured times the fill by wrapping aotx.structured.batch.fill_rows
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aotx.engine.sequence import Sequence as Seq
from kernels.token_mask import TokenMask, mask_words


class MaskOutOfStep(RuntimeError):
    """A constrained row's matcher has not seen every token sampled before this step."""


def step_mask(sampled: Sequence[Seq]) -> TokenMask | None:
    rows = [j for j, seq in enumerate(sampled) if seq.matcher is not None]
    if not rows:
        return None
    # llguidance is imported only once a request has a constraint: engine runs without one (the GPU
    # benches on an image that lacks the wheel) never load it
    from aotx.structured.batch import fill_rows

    matchers = []
    for j in rows:
        seq = sampled[j]
        if seq.pending or seq.matcher.consumed != len(seq.output_ids):
            raise MaskOutOfStep(f"sequence {seq.seq_id}: matcher at {seq.matcher.consumed} tokens, "
                                f"output at {len(seq.output_ids)} (+{seq.pending} pending)")
        matchers.append(seq.matcher)
    vocab = max(int(sampled[j].params.constraint.vocab_size) for j in rows)
    bits = np.zeros((len(rows), mask_words(vocab)), dtype=np.uint32)
    fill_rows(matchers, bits)
    return TokenMask(np.array(rows, dtype=np.int32), bits)
