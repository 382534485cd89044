"""The engine thread's check of a constrained step's tokens at their read-back, for the step at once (issue 14,
session 14): where the runner chains the masks (aotx.engine.masks: each launch's mask knows the next launch's,
whose worker consumes its rows' tokens), a step's tokens are checked against the bits of the mask that drew
them with a few array operations, and no row's matcher is asked (RowMatcher.sync, a call a row, is what that
check makes for each row). Where the check cannot pass (a token its bit refuses, a failed matcher, a row whose
token nobody consumes on the worker, a row with more to report), each row's matcher is told what its own sync
needs: the row of the mask that let its token through, and the mask that consumes it (RowMatcher.mark).
"""
from __future__ import annotations

import operator

import numpy as np

OK = operator.attrgetter("_ok")     # a RowMatcher's: not failed


def verify(mask, ids, results=None) -> bool:
    """True where every row of `mask` (LateMask, at its launch's read-back; `ids`: that launch's sampled ids,
    an array) has its token allowed by its row of the bits, no row's matcher has failed, and the next launch's
    mask consumes every row's token on the worker (``consumer``): RowMatcher.sync's answer for each row. Else
    False, each row's matcher told its marks (``mark``). Always False, and nobody told, for a mask that is not
    chained (told at defer) or whose worker does not consume (the engine thread's sync does)."""
    if not mask.worker_consumes or not mask._chained:
        return False
    consumer = mask.consumer
    if (not results and mask._fast and consumer is not None and consumer.worker_consumes
            and consumer._pending_n == len(mask.rows) and mask.flat is not None and not mask._bits_gone
            and ids is not None and all_ok(mask._matchers, mask._ok_seen) and allowed(mask, ids)):
        return True
    mark(mask)
    return False


def allowed(mask, ids) -> bool:
    """Every row's token (its row of `ids`) has its bit set in its row of `mask`'s bits (0 <= token < 32 *
    words, as LateMask.allows: a token out of range is an index out of range here, as an unsigned number)."""
    got = mask._mask
    if type(ids) is not np.ndarray:
        ids = np.asarray(ids)
    tok = (ids if len(ids) == len(mask.rows) else ids[got.rows]).astype(np.uint64)
    n = len(tok)
    if mask._bits_ix is None or len(mask._bits_ix[0]) != n:
        mask._bits_ix = (np.arange(n), np.ones(n, dtype=np.uint64).tobytes())
    ix, ones = mask._bits_ix
    try:
        words = got.bits[ix, tok >> 5]
    except IndexError:
        return False
    return ((words >> (tok & 31)) & 1).tobytes() == ones


def mark(mask) -> None:
    """Tell each row's matcher what ``verify`` could not check for the step: the row of `mask` that let its
    token through, and the consumer mask that consumes it on the worker, if any (else nobody: its sync does)."""
    consumer = mask.consumer
    taken: dict = {}
    if consumer is not None and consumer.worker_consumes:
        taken = {id(m): (consumer, index) for m, row, index in
                 zip(consumer._matchers, consumer._id_col, consumer._index_col) if row >= 0}
    for r, (m, row, index) in enumerate(zip(mask._matchers, mask._id_col, mask._index_col)):
        m.mark(mask, r, index + 1 if row >= 0 else index, taken.get(id(m)))


def all_ok(matchers: list, seen: list) -> bool:
    """No matcher of `matchers` (RowMatcher's, whose class counts every row's failure) has failed: each row's
    flag is read only where a row failed anywhere since `seen[0]`, the count when they were last read all ok
    (a holder shared by the steps over the same matchers, on one thread). The count is taken before the flags
    are read, and a failing row sets its flag before it counts: a failure meanwhile is read next time."""
    failures = getattr(type(matchers[0]), "failures", None) if matchers else None
    if failures is not None and seen[0] == failures:
        return True
    if not all(map(OK, matchers)):
        return False
    seen[0] = failures
    return True
