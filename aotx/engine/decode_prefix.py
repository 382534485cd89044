"""The scheduler's side of the persistent batch: the leading running sequences that decode one token a step,
carried from one schedule to the next as arrays (tokens computed, tokens left to sample), so a steady step
schedules them without looking at each one. Only after the step scheduled from it was launched (`armed`):
then each scheduled row has one more token computed and one more sampled, and nothing else moved them
(a read-back adds an output token and takes a pending one away; a finished sequence leaves `running`)."""
from __future__ import annotations

import numpy as np

from aotx.engine.sequence import SequenceStatus

FINISHED = SequenceStatus.FINISHED
_I64 = np.empty(0, dtype=np.int64)


class DecodePrefix:
    def __init__(self) -> None:
        self.rows: list = []            # their ScheduledSeq (decode_row), in running order
        self.seqs: list = []
        self.computed = _I64            # each one's num_computed at the next schedule
        self.left = _I64                # each one's max_tokens - sampled at the next schedule
        self.armed = False
        self._new: tuple[list, list, list[int], list[int]] | None = None

    def take(self, running: list, blocks, scheduled: list) -> int:
        """Schedule the prefix's sequences (those still running, in the same order at the head of
        `running`) into `scheduled`; returns how many running sequences it covered (0: none)."""
        armed, self.armed = self.armed, False
        seqs = self.seqs
        if not armed or not seqs:
            self.clear()
            return 0
        rows, computed, left = self.rows, self.computed, self.left
        m = len(seqs)
        # the common case: the same sequences still lead `running` (finish() takes a sequence out of
        # it), so none finished: no row looked at
        if running[:m] != seqs:
            alive = [q.status is not FINISHED for q in seqs]
            if not all(alive):
                idx = np.flatnonzero(alive)
                seqs, rows, computed, left = [seqs[i] for i in idx], [rows[i] for i in idx], computed[idx], left[idx]
                m = len(seqs)
            if not m or running[:m] != seqs:
                self.clear()
                return 0
        page = blocks.page_size
        starts = computed % page == 0            # a position that starts a page: it may need one
        if left.min() > 0:     # every one samples again (the common case)
            hits = np.flatnonzero(starts)
            scheduled.extend(rows)
            self.computed, self.left = computed + 1, left - 1
        else:
            go = left > 0
            hits = np.flatnonzero(starts & go)
            scheduled.extend([rows[i] for i in np.flatnonzero(go)])
            self.computed, self.left = computed + go, left - go
        for i in hits.tolist():
            c = int(computed[i])
            if len(blocks.block_table(seqs[i].seq_id)) * page <= c:
                blocks.ensure_capacity(seqs[i].seq_id, c + 1)
        self.seqs, self.rows = seqs, rows
        return m

    def clear(self) -> None:
        self.rows, self.seqs, self.computed, self.left = [], [], _I64, _I64

    def extend(self, seqs: list, rows: list, computed: list[int], left: list[int]) -> None:
        """Rows after the prefix (looked at one by one this time), as they will be at the next schedule."""
        if seqs:
            self.seqs = self.seqs + seqs
            self.rows = self.rows + rows
            self.computed = np.concatenate([self.computed, np.array(computed, dtype=np.int64)])
            self.left = np.concatenate([self.left, np.array(left, dtype=np.int64)])
