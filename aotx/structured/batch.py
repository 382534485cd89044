"""Fill the bitmasks of a step's constrained rows at once (llguidance's thread pool), and advance the
rows by a step's tokens.

llguidance's ``LLExecutor`` fills the rows on its own threads with the GIL released, in one call
(the mask worker hands the GIL back once per step, not once per row), and consumes a step's tokens the
same way (``consume_rows``, from ``par_rows()`` rows); its pool is ``threads()`` (``AOTX_MASK_THREADS``
sets another size)."""
from __future__ import annotations

import os
from collections.abc import Sequence

import llguidance
import numpy as np

from aotx.structured.constraint import RowMatcher

_executor: llguidance.LLExecutor | None = None


def threads() -> int:
    """The executor's thread count: AOTX_MASK_THREADS, else an eighth of the CPUs, 1 to 4. Not
    llguidance's default (80 % of the CPUs): on the H200 host its 12 threads filled 63 rows slower
    than one Python call a row (2.2 against 1.4 ms), and on the 2-core box 8 threads took 3.7x one
    thread's time (docs/PERFORMANCE.md, "the mask worker"); the pool's threads spin between calls."""
    env = os.environ.get("AOTX_MASK_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, (os.cpu_count() or 1) // 8))


def lexers() -> int:
    """How many prototypes (lexers) a constraint spreads its sequences over (Constraint.prepare, at
    compile time): AOTX_MASK_LEXERS, else as many as the executor's threads (``threads()``: 1 on a
    2-core box, 2 on 16 CPUs). Rows of one lexer fill one at a time (its mutex), so a lexer per thread
    lets the threads fill in parallel (H100 host, 64 rows: 1 lexer 2 threads 858 µs a step, 2 lexers
    558); more lexers than threads only cost, since each lexer builds its own DFA states, which one
    shared lexer builds once for every row (2-core box, 1 thread: 1 lexer 393 µs, 2 lexers 511):
    ops.bench.mask_lexers measures both (docs/PERFORMANCE.md, session 7 and session 11)."""
    env = os.environ.get("AOTX_MASK_LEXERS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return threads()


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
    # rows of one lexer (RowMatcher.group) next to each other: the pool's threads take contiguous runs
    # of the list, so each mostly fills one lexer's rows and none waits for another's lexer mutex
    rows = enumerate(matchers)
    if any(getattr(m, "group", 0) for m in matchers):
        rows = sorted(rows, key=lambda jm: getattr(jm[1], "group", 0))
    fill_pairs([(m.ll, j) for j, m in rows], bits, [m.ll for m in matchers])


def fill_pairs(pairs: list[tuple[llguidance.LLMatcher, int]], bits: np.ndarray,
               lls: Sequence[llguidance.LLMatcher]) -> None:
    """Row j of `bits` (uint32 [M, W], C-contiguous) := the next-token mask of llguidance matcher m, for
    each (m, j) of `pairs` (rows of one lexer next to each other: fill_rows says why; `lls`: the same
    matchers in any order); one call, the GIL released. Raises where a matcher failed (RowMatcher.check)."""
    if bits.dtype != np.uint32 or not bits.flags["C_CONTIGUOUS"] or bits.ndim != 2:
        raise ValueError("bits must be a C-contiguous uint32 [rows, words] array")
    if len(pairs) == 1:
        ll, j = pairs[0]
        ll.unsafe_compute_mask_ptr(bits[j].ctypes.data, bits.shape[1] * 4)
    else:
        _pool().unsafe_compute_mask_ptr(pairs, bits.ctypes.data, bits.shape[1] * 4, bits.shape[0])
    if any(map(llguidance.LLMatcher.is_error, lls)):
        bad = next(ll for ll in lls if ll.is_error())
        raise RuntimeError(f"constraint matcher failed: {bad.get_error()}")


def par_rows() -> int:
    """From how many rows a step's consume is one GIL-released llguidance call (``consume_token_par``)
    instead of a GIL-held call a row: AOTX_MASK_CONSUME_PAR (0: never), else 8. llguidance's consume
    is ~3 µs of Rust a row; called a row at a time it holds the GIL throughout, so beside an engine
    thread running Python the 64-row loop took 0.3-0.85 ms on the mask worker (GPU hosts, session 11);
    in one call the engine thread runs meanwhile (docs/PERFORMANCE.md, issue 14, session 12)."""
    env = os.environ.get("AOTX_MASK_CONSUME_PAR", "")
    return int(env) if env.isdigit() else 8


def consume_rows(matchers: Sequence[RowMatcher], lls: Sequence[llguidance.LLMatcher], tokens: list[int],
                 records: list[list[int]] | None = None) -> None:
    """matchers[j] (whose llguidance matcher is lls[j]) consumes tokens[j] (ints), each at its next
    index (the caller checked: aotx.engine.masks). From ``par_rows()`` rows on, one llguidance call
    with the GIL released (its pool; the consume ``RowMatcher.consume`` makes), else a call a row.
    A refused token fails its row (RowMatcher.failed). `records`: the matchers' token lists, where the caller
    has them (RowMatcher.consumed_par)."""
    par = par_rows()
    if par and len(lls) >= par:
        RowMatcher.consumed_par(matchers, tokens, _pool().consume_token_par(list(zip(lls, tokens))), records)
    else:
        for m, t in zip(matchers, tokens):
            m.consume(t)


def sync_rows(matchers: Sequence[RowMatcher], indexes: Sequence[int], tokens: Sequence[int]) -> list[bool]:
    """`matchers[j].sync(indexes[j], tokens[j])` for every j, one Python call a row: llguidance's
    consume holds the GIL for its ~3 µs (the general path of a step's consume; the mask worker's is
    consume_rows)."""
    return [m.consume(tok) if index == m.consumed else m.sync(index, tok)
            for m, index, tok in zip(matchers, indexes, tokens)]
