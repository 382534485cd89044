"""Fill the bitmasks of a step's constrained rows at once, and advance the rows by a step's tokens
at once (llguidance's thread pool).

llguidance's ``LLExecutor`` fills the rows on its own threads with the GIL released; its default
pool is 80 % of the CPUs, at most 32 (``AOTX_MASK_THREADS`` sets another size)."""
from __future__ import annotations

import os
from collections.abc import Sequence

import llguidance
import numpy as np

from aotx.structured.constraint import RowMatcher

_executor: llguidance.LLExecutor | None = None


def threads() -> int:
    """The executor's thread count: AOTX_MASK_THREADS, else llguidance's default."""
    env = os.environ.get("AOTX_MASK_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(32, int(0.8 * (os.cpu_count() or 1))))


def _pool() -> llguidance.LLExecutor:
    global _executor
    if _executor is None:
        _executor = llguidance.LLExecutor(num_threads=threads())
    return _executor


def fill_rows(matchers: Sequence[RowMatcher], bits: np.ndarray) -> None:
    """Row j of `bits` (uint32 [M, W], C-contiguous) := the next-token mask of matchers[j]."""
    if bits.dtype != np.uint32 or not bits.flags["C_CONTIGUOUS"] or bits.shape[0] != len(matchers):
        raise ValueError("bits must be a C-contiguous uint32 [len(matchers), words] array")
    if len(matchers) == 1:
        matchers[0].fill(bits[0])
        return
    pairs = [(m.ll, j) for j, m in enumerate(matchers)]
    _pool().unsafe_compute_mask_ptr(pairs, bits.ctypes.data, bits.shape[1] * 4, bits.shape[0])
    for m in matchers:
        m.check()


def sync_rows(matchers: Sequence[RowMatcher], indexes: Sequence[int], tokens: Sequence[int]) -> list[bool]:
    """`matchers[j].sync(indexes[j], tokens[j])` for every j; the tokens not consumed yet are consumed
    in one call on llguidance's threads (the GIL released) instead of one Python call each."""
    out: list[bool | None] = [None] * len(matchers)
    todo = []
    for j, (m, index, tok) in enumerate(zip(matchers, indexes, tokens)):
        if index == m.consumed:
            todo.append(j)
        else:
            out[j] = m.sync(index, tok)     # consumed already (a comparison), or out of step (raises)
    if len(todo) == 1:
        out[todo[0]] = matchers[todo[0]].consume(tokens[todo[0]])
    elif todo:
        accepted = _pool().consume_token_par([(matchers[j].ll, int(tokens[j])) for j in todo])
        for j, ok in zip(todo, accepted):
            out[j] = matchers[j].consumed_as(tokens[j], bool(ok))
    return [bool(ok) for ok in out]
