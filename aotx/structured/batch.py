"""Fill the bitmasks of a step's constrained rows at once (llguidance's thread pool)."""
from __future__ import annotations

from collections.abc import Sequence

import llguidance
import numpy as np

from aotx.structured.constraint import RowMatcher

_executor: llguidance.LLExecutor | None = None


def fill_rows(matchers: Sequence[RowMatcher], bits: np.ndarray) -> None:
    """Row j of `bits` (uint32 [M, W], C-contiguous) := the next-token mask of matchers[j]."""
    global _executor
    if bits.dtype != np.uint32 or not bits.flags["C_CONTIGUOUS"] or bits.shape[0] != len(matchers):
        raise ValueError("bits must be a C-contiguous uint32 [len(matchers), words] array")
    if len(matchers) == 1:
        matchers[0].fill(bits[0])
        return
    if _executor is None:
        _executor = llguidance.LLExecutor()
    pairs = [(m.ll, j) for j, m in enumerate(matchers)]
    _executor.unsafe_compute_mask_ptr(pairs, bits.ctypes.data, bits.shape[1] * 4, bits.shape[0])
    for m in matchers:
        m.check()
