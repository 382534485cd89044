"""The persistent batch's block tables: each sequence the runner builds keeps a slot (a row of one
preallocated int32 array) from its first step to its end, and its row is updated in place when its
block table grows (one page every `page_size` decode steps), never rebuilt from the page list.

A step's block tables are one fancy-index of the rows of its sequences (a copy: the launched step
keeps it while the next one is built). A slot is reused once its sequence has finished; a sequence
that lost its slot (the table reclaimed it) gets a fresh one, filled from its page list again.
Owned by the engine's step thread (aotx.engine.runner); no backend, no policy.
"""
from __future__ import annotations

import numpy as np

from aotx.engine.sequence import Sequence, SequenceStatus

FINISHED = SequenceStatus.FINISHED


class SlotTables:
    def __init__(self, capacity: int = 64, width: int = 16) -> None:
        self.owner: list[Sequence | None] = [None] * capacity
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        self.tables = np.full((capacity, width), -1, dtype=np.int32)
        self.npages = np.zeros(capacity, dtype=np.int64)     # valid pages of each slot's row

    def slot(self, seq: Sequence) -> int:
        """`seq`'s slot, given one if it has none (its row then holds no page yet)."""
        s = seq.slot
        if 0 <= s < len(self.owner) and self.owner[s] is seq:
            return s
        if not self._free:
            self._reclaim()
        s = self._free.pop()
        self.owner[s] = seq
        seq.slot = s
        n = int(self.npages[s])
        if n:
            self.tables[s, :n] = -1
            self.npages[s] = 0
        return s

    def sync(self, s: int, pages: list[int]) -> None:
        """Slot `s`'s row catches up with its sequence's page list (pages only grow while it lives)."""
        n, m = int(self.npages[s]), len(pages)
        if m <= n:
            return
        if m > self.tables.shape[1]:
            grown = np.full((self.tables.shape[0], max(m, 2 * self.tables.shape[1])), -1, dtype=np.int32)
            grown[:, :self.tables.shape[1]] = self.tables
            self.tables = grown
        self.tables[s, n:m] = pages[n:]
        self.npages[s] = m

    def _reclaim(self) -> None:
        """Free the slots of finished sequences; grow when every slot is taken by a live one."""
        for i, q in enumerate(self.owner):
            if q is not None and q.status is FINISHED:
                self.owner[i] = None
                self._free.append(i)
        if not self._free:
            cap = len(self.owner)
            self.owner.extend([None] * cap)
            self._free = list(range(2 * cap - 1, cap - 1, -1))
            tables = np.full((2 * cap, self.tables.shape[1]), -1, dtype=np.int32)
            tables[:cap] = self.tables
            self.tables = tables
            self.npages = np.concatenate([self.npages, np.zeros(cap, dtype=np.int64)])
