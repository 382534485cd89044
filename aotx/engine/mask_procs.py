"""Token masks filled by matcher processes (``AOTX_MASK_PROCS=N``, N >= 1; 0 or unset: the mask
worker thread of aotx.engine.mask_worker, the default until the processes measure better on a GPU).

The constrained rows' matchers live in N processes (aotx.structured.matcher_pool), each owning the
rows it was given. A step's mask (``ProcLateMask``, LateMask's interface for the launchers) is sent
to the processes on the engine thread, in launch order: at once when no row has a token pending on the
device (the processes then fill while the forward runs, even in the classic loop), else when the
engine thread reads the step before back (``MaskWorker.read_back``: the frame carries those tokens, a
few bytes a row; the processes consume them and fill). Collecting the replies (the processes' bits
copied out of shared memory into the launcher's buffer, ``into``, or a new array) is the mask's
``run``: on the mask worker's thread where the launcher defers the sampling (CUDA's gate opens there
with one store, or its sampling is enqueued there), else where the launcher asks for the mask. The
engine thread makes no llguidance call at all; the collecting thread needs the GIL once a step.

A row whose process died (or refused a token) fails with the reason (ProcRowMatcher.error) and its
request ends with an error when that step's token is read back; the other rows and requests go on, and
the next new row starts a fresh process in its place. ``close`` stops the worker thread and the
processes and unlinks the shared memory.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence

from aotx.engine.mask_worker import MaskWorker
from aotx.engine.masks import LateMask, MaskOutOfStep, step_mask
from aotx.engine.sequence import Sequence as Seq


def procs() -> int:
    """AOTX_MASK_PROCS: how many matcher processes (0: none, the mask worker thread fills)."""
    raw = os.environ.get("AOTX_MASK_PROCS", "").strip()
    return int(raw) if raw.isdigit() else 0


class ProcLateMask(LateMask):
    """LateMask whose consume sends the step to the matcher processes and whose fill collects it."""

    def __init__(self, sampled: Sequence[Seq], previous, pool) -> None:
        super().__init__(sampled, previous)
        self._pool = pool
        self._ticket = None
        self._owner = threading.current_thread()
        from aotx.structured.proc_row import ProcRowMatcher
        for seq in self._seq_col:
            if type(seq.matcher) is not ProcRowMatcher:        # first step of this row: move it
                seq.matcher = pool.adopt(seq.matcher)
        self._matchers = [seq.matcher for seq in self._seq_col]

    def _consume(self) -> list[bool]:
        if threading.current_thread() is not self._owner:
            # only a mask whose step before was never read back gets here (the launch after it failed)
            raise MaskOutOfStep(f"rows {self.rows}: the step before this one was never read back")
        ids = None
        if self.reads_previous:
            if self._previous is None:
                raise MaskOutOfStep("a pending token and no step to read it from")
            ids = self._previous.ids().tolist()
        rows = [seq.matcher for seq, _, _ in self._seqs]
        learnt = [ids[row] if row >= 0 else -1 for _, row, _ in self._seqs] if ids is not None else None
        known = [index + (row >= 0) for _, row, index in self._seqs]
        try:
            self._ticket = self._pool.submit(rows, self.words, learnt, known)
        except ValueError as exc:       # a row's matcher out of step with its output
            raise MaskOutOfStep(str(exc)) from None
        return [True] * len(rows)

    def _fill(self, ok: list[bool]):
        import numpy as np

        from kernels.token_mask import TokenMask
        bits = self._out if self._out is not None else np.empty((len(self._seqs), self.words), dtype=np.uint32)
        self._pool.collect(self._ticket, bits)
        return TokenMask(np.array(self.rows, dtype=np.int32), bits)


class ProcMaskWorker(MaskWorker):
    """MaskWorker whose masks are ProcLateMasks: the same hand-over (take, handed, read_back), the
    worker thread only collecting the processes' replies. A row whose matcher cannot move to a
    process (a matcher of another kind: the benches' all-allowed probe) makes its step a LateMask."""

    consumes = False    # (read_back sends the step's tokens to the processes, on the engine thread)

    def __init__(self, size: int, tokenizer=None) -> None:
        """`tokenizer` (the engine's; one with hf_json()): the processes start now and build it, so the
        first constrained request waits for neither; without it they start at the first constrained step."""
        super().__init__()
        self.size = size
        self.pool = None
        if tokenizer is not None and hasattr(tokenizer, "hf_json") and importlib.util.find_spec("llguidance"):
            # (an image without llguidance has no constrained requests: nothing to start)
            from aotx.structured.matcher_pool import MatcherPool
            from aotx.structured.tokenizer_key import tokenizer_source
            self.pool = MatcherPool(size)
            self.pool.start(tokenizer_source(tokenizer))

    def step_mask(self, sampled: Sequence[Seq], previous=None, last=False) -> LateMask | None:
        # (aotx.structured imports llguidance: only once a constrained step comes)
        from aotx.structured.proc_row import ProcRowMatcher
        constrained = False
        for seq in sampled:
            m = seq.matcher
            if m is None:
                continue
            constrained = True
            if type(m) is not ProcRowMatcher and getattr(getattr(m, "constraint", None), "source", None) is None:
                return step_mask(sampled, previous)     # (a matcher that cannot move: the thread's way)
        if not constrained:
            return None
        if self.pool is None:
            from aotx.structured.matcher_pool import MatcherPool
            self.pool = MatcherPool(self.size)
        mask = ProcLateMask(sampled, previous, self.pool)
        if not mask.reads_previous:
            mask.consume()             # sent now: the processes fill while the forward runs
        return mask

    def close(self) -> None:
        super().close()
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def mask_worker(tokenizer=None) -> MaskWorker:
    """The engine's mask worker: matcher processes where AOTX_MASK_PROCS >= 1 (started now, building
    `tokenizer`), else the thread."""
    size = procs()
    return ProcMaskWorker(size, tokenizer) if size > 0 else MaskWorker()
