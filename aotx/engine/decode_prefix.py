"""The scheduler's side of the persistent batch: the leading running sequences that decode one token a step,
carried from one schedule to the next as arrays (tokens computed, tokens left to sample), so a steady step
schedules them without looking at each one. Only after the step scheduled from it was launched (`armed`):
then each scheduled row has one more token computed and one more sampled, and nothing else moved them
(a read-back adds an output token and takes a pending one away; a finished sequence leaves `running`).

While every row samples again, the arrays are not rewritten each step: each row's count is its base plus
the steps taken since (`_t`), and the rows whose position starts a page at step t (they may need one) are
those whose base is -t modulo the page size (`_at_page`, grouped once per base)."""
from __future__ import annotations

import numpy as np

from aotx.engine.sequence import SequenceStatus

FINISHED = SequenceStatus.FINISHED
_I64 = np.empty(0, dtype=np.int64)


class DecodePrefix:
    def __init__(self) -> None:
        self.rows: list = []            # their ScheduledSeq (decode_row), in running order
        self.seqs: list = []
        self._computed = _I64           # each one's num_computed at the next schedule, less _t
        self._left = _I64               # each one's max_tokens - sampled at the next schedule, plus _t
        self._t = 0                     # steps taken since the arrays were written
        self._min_left = 0              # _left.min() (0 when empty)
        self._at_page: dict[int, list[int]] | None = None   # _computed % page -> its rows (built when asked)
        self.armed = False

    @property
    def computed(self) -> np.ndarray:
        """Each row's num_computed at the next schedule."""
        return self._computed + self._t if self._t else self._computed

    @property
    def left(self) -> np.ndarray:
        """Each row's tokens left to sample at the next schedule."""
        return self._left - self._t if self._t else self._left

    def take(self, running: list, blocks, scheduled: list) -> int:
        """Schedule the prefix's sequences (those still running, in the same order at the head of
        `running`) into `scheduled`; returns how many running sequences it covered (0: none)."""
        armed, self.armed = self.armed, False
        seqs = self.seqs
        if not armed or not seqs:
            self.clear()
            return 0
        m = len(seqs)
        page = blocks.page_size
        # the common case: the same sequences still lead `running` (finish() takes a sequence out of
        # it, so none finished), each samples again: no row looked at, no array written
        if self._min_left > self._t and running[:m] == seqs:
            t = self._t
            at_page = self._at_page
            if at_page is not None:
                hits = at_page.get(-t % page, ())
            elif t < 2:      # a fresh base (rows come and go every step or two): one array pass
                hits = np.flatnonzero(self._computed % page == -t % page).tolist()
            else:            # a base that lasts: its rows grouped by page offset, once
                at_page = self._at_page = {}
                for i, r in enumerate((self._computed % page).tolist()):
                    at_page.setdefault(r, []).append(i)
                hits = at_page.get(-t % page, ())
            scheduled.extend(self.rows)
            self._t = t + 1
            computed = self._computed
            for i in hits:
                c = int(computed[i]) + t
                if len(blocks.block_table(seqs[i].seq_id)) * page <= c:
                    blocks.ensure_capacity(seqs[i].seq_id, c + 1)
            return m
        rows, computed, left = self.rows, self.computed, self.left
        if running[:m] != seqs:
            alive = [q.status is not FINISHED for q in seqs]
            if not all(alive):
                idx = np.flatnonzero(alive)
                seqs, rows, computed, left = [seqs[i] for i in idx], [rows[i] for i in idx], computed[idx], left[idx]
                m = len(seqs)
            if not m or running[:m] != seqs:
                self.clear()
                return 0
        starts = computed % page == 0            # a position that starts a page: it may need one
        if left.min() > 0:     # every one samples again
            hits = np.flatnonzero(starts)
            scheduled.extend(rows)
            self._set(seqs, rows, computed + 1, left - 1)
        else:
            go = left > 0
            hits = np.flatnonzero(starts & go)
            scheduled.extend([rows[i] for i in np.flatnonzero(go)])
            self._set(seqs, rows, computed + go, left - go)
        for i in hits.tolist():
            c = int(computed[i])
            if len(blocks.block_table(seqs[i].seq_id)) * page <= c:
                blocks.ensure_capacity(seqs[i].seq_id, c + 1)
        return m

    def _set(self, seqs: list, rows: list, computed: np.ndarray, left: np.ndarray) -> None:
        self.seqs, self.rows, self._computed, self._left = seqs, rows, computed, left
        self._t, self._at_page = 0, None
        self._min_left = int(left.min()) if len(left) else 0

    def clear(self) -> None:
        self._set([], [], _I64, _I64)

    def extend(self, seqs: list, rows: list, computed: list[int], left: list[int]) -> None:
        """Rows after the prefix (looked at one by one this time), as they will be at the next schedule."""
        if seqs:
            self._set(self.seqs + seqs, self.rows + rows,
                      np.concatenate([self.computed, np.array(computed, dtype=np.int64)]),
                      np.concatenate([self.left, np.array(left, dtype=np.int64)]))
