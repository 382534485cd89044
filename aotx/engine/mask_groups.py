"""A constrained step's mask in two row groups (issue 14, session 15; ``AOTX_MASK_GROUPS=2``, default 1).

Why: on a slow host the mask worker's chain for a step (llguidance's consume of the step before's tokens, then
the fill of every row's mask: W, ~1.3-1.5 ms for 64 rows) is longer than the forward (F, ~1.15 ms), and each
step is S + max(F, W) (S the sampling): the next forward waits for every row's id, the next mask for every
row's token. With the sampled rows cut in two ranges, each with half of the constrained rows and its own
LateMask (``parts``), CUDA's launcher samples each range behind its own gate and copies its ids back with an
event after each (kernels/cuda/sample_parts.py): the worker consumes range 1's tokens and fills range 1's next
mask as soon as range 1's ids are read (the launch's ``first``), while range 2 is sampled; the step becomes
about max(F + S, W).

A MaskGroups is what the launchers and the engine see for the step (``__call__`` gives one TokenMask of both
ranges: the numpy launchers and the classic loop sample every row at once with it); the mask worker fills its
parts one after the other, in launch order (aotx.engine.mask_worker), so their gates open in order. A steady
step (the same sampled rows as the launch before) takes each part from the launch before's part of the same
range (LateMask.following), chained part to part; otherwise the parts are new, and the mask before learns that
this whole one consumes its rows' tokens (``consumer``: mask_check reads its columns as one mask's).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numpy as np

from aotx.engine import mask_check
from aotx.engine.masks import LateMask, step_mask
from aotx.engine.sequence import Sequence as Seq
from kernels.token_mask import TokenMask

ENV = "AOTX_MASK_GROUPS"
MIN_ROWS = 2        # fewer constrained rows than this: one group (today's path)


def groups(env=os.environ) -> int:
    """AOTX_MASK_GROUPS: 1 (one mask a step) or 2 (two row groups); unset or empty: 1."""
    value = env.get(ENV, "") or "1"
    if value not in ("1", "2"):
        raise ValueError(f"{ENV} must be 1 or 2, got {value!r}")
    return int(value)


class MaskGroups:
    """A step's mask as two LateMasks over the sampled rows [0, split) and [split, n) (``bounds``)."""

    def __init__(self, sampled, parts: list[LateMask], bounds: list[tuple[int, int]], last) -> None:
        self._sampled_list = sampled
        self.parts, self.bounds = parts, bounds
        self._before = last if last is not False else None   # (until defer: linked as its ``consumer``)
        if self._before is not None:
            self._before._before = None
        self.deferred = False
        self.worker_consumes = False
        self._fast = False
        self._consumer = None

    def following(self, previous) -> "MaskGroups":
        """The next launch's, over the same sampled rows (each part ``LateMask.following`` its own: range 1's
        tokens read from `previous`'s first range where its launch copied that range apart: ``first``)."""
        first = getattr(previous, "first", None)
        early = first if first is not None and first.n >= self.bounds[0][1] else previous
        parts = [LateMask.following(self.parts[0], early)]
        parts += [LateMask.following(p, previous) for p in self.parts[1:]]
        return MaskGroups(self._sampled_list, parts, self.bounds, None)

    # -- one mask's columns, for the mask before whose tokens it consumes (mask_check.verify / mark) --------
    @property
    def rows(self) -> list[int]:
        return [r for p in self.parts for r in p.rows]

    @property
    def words(self) -> int:
        return max(p.words for p in self.parts)

    @property
    def _matchers(self) -> list:
        return [m for p in self.parts for m in p._matchers]

    @property
    def _id_col(self) -> list[int]:
        return [r for p in self.parts for r in p._id_col]

    @property
    def _index_col(self) -> list[int]:
        return [i for p in self.parts for i in p._index_col]

    @property
    def _pending_n(self) -> int:
        return sum(p._pending_n for p in self.parts)

    @property
    def consumer(self):
        return self._consumer

    @consumer.setter
    def consumer(self, mask) -> None:
        """The next launch's mask consumes these rows' tokens: each part's ``consumer``. Its pending rows are
        this whole mask's, not a part's: a part's read-back takes the marked path (not its step-wide check)."""
        self._consumer = mask
        for p in self.parts:
            p.consumer = mask
            p._fast = False

    @property
    def previous(self):
        return self.parts[-1].previous

    @property
    def reads_previous(self) -> bool:
        return any(p.reads_previous for p in self.parts)

    def defer(self, worker_consumes: bool = False) -> None:
        """Each part's ``defer``; the mask before (not chained part to part) learns this one consumes its rows'."""
        self.deferred = True
        before, self._before = self._before, None
        for p in self.parts:
            p.defer(worker_consumes)
        self.worker_consumes = all(p.worker_consumes for p in self.parts)
        if before is not None and self.worker_consumes:
            before.consumer = self

    def verify(self, ids, results=None) -> bool:
        """Every part's check for the step (LateMask.verify); where one cannot pass, each part that did is
        told its marks too: the step's rows then each ``sync``."""
        got = [p.verify(ids, results) for p in self.parts]
        if all(got):
            return True
        for p, ok in zip(self.parts, got):
            if ok:
                mask_check.mark(p)
        return False

    def wait_consumed(self) -> None:
        for p in self.parts:
            p.wait_consumed()

    def ready(self) -> bool:
        return all(p.ready() for p in self.parts)

    def when_ready(self, fn) -> None:
        """`fn()` once every part is computed, on the thread that computes the last of them."""
        left = [len(self.parts)]
        lock = threading.Lock()

        def one() -> None:
            with lock:
                left[0] -= 1
                done = left[0] == 0
            if done:
                fn()
        for p in self.parts:
            p.when_ready(one)

    def run(self) -> None:
        """Each part's ``run``, in order (where no worker fills them: the classic loop's ``__call__``, tests)."""
        for p in self.parts:
            p.run()

    def __call__(self) -> TokenMask:
        """One TokenMask of every part's rows (each part computed here unless the worker has it)."""
        got = [p() for p in self.parts]
        words = max(m.bits.shape[1] for m in got)
        bits = np.zeros((sum(len(m.rows) for m in got), words), dtype=np.uint32)
        at = 0
        for m in got:
            bits[at:at + len(m.rows), :m.bits.shape[1]] = m.bits
            at += len(m.rows)
        return TokenMask(np.concatenate([np.asarray(m.rows, dtype=np.int32) for m in got]), bits)


def step_masks(sampled: Sequence[Seq], previous=None, last=False):
    """The launch's mask in two row groups (``step_mask``'s arguments): a MaskGroups, or, with fewer than
    MIN_ROWS constrained rows, ``step_mask``'s own (one LateMask, or None)."""
    if type(last) is MaskGroups and previous is not None and last._sampled_list == sampled:
        return last.following(previous)
    rows = [j for j, seq in enumerate(sampled) if seq.matcher is not None]
    if len(rows) < MIN_ROWS:
        return step_mask(sampled, previous, last)
    split = rows[len(rows) // 2]
    first = LateMask(sampled, previous, None, 0, split)
    early = getattr(previous, "first", None)
    if early is not None and first._pending_n and max(first._id_col) < early.n:
        first._previous = early     # (its rows' tokens are in the range the launch before copied apart)
    second = LateMask(sampled, previous, None, split, None)
    return MaskGroups(sampled, [first, second], [(0, split), (split, len(sampled))], last)
