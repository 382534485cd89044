"""Where KV lives: the page pool, its free list and each sequence's block table.

Mechanism only: the scheduler decides who may grow; this module hands out
pages and answers "which flat slot does position p of sequence s write to".
No numpy, no backend: testable alone.
"""
from __future__ import annotations

from collections import deque


class OutOfPages(RuntimeError):
    """The pool has fewer free pages than a request for pages needs."""


def pages_for(num_tokens: int, page_size: int) -> int:
    """Pages needed to hold `num_tokens` tokens of KV."""
    return -(-max(num_tokens, 0) // page_size)


class BlockManager:
    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages <= 0 or page_size <= 0:
            raise ValueError("num_pages and page_size must be positive")
        self.num_pages = num_pages
        self.page_size = page_size
        self._free: deque[int] = deque(range(num_pages))
        self._tables: dict[int, list[int]] = {}

    # -- accounting -----------------------------------------------------
    @property
    def free_pages(self) -> int:
        return len(self._free)

    @property
    def pages_in_use(self) -> int:
        return self.num_pages - len(self._free)

    def block_table(self, seq_id: int) -> list[int]:
        """The pages of `seq_id` in position order (empty if it holds none)."""
        return self._tables.get(seq_id, [])

    def capacity(self, seq_id: int) -> int:
        """Tokens `seq_id` can hold without another page."""
        return len(self.block_table(seq_id)) * self.page_size

    # -- allocation -----------------------------------------------------
    def ensure_capacity(self, seq_id: int, num_tokens: int) -> list[int]:
        """Grow `seq_id`'s table so positions [0, num_tokens) have a slot.

        Returns the newly allocated pages. Raises OutOfPages (allocating
        nothing) when the pool cannot cover the growth.
        """
        table = self._tables.setdefault(seq_id, [])
        missing = pages_for(num_tokens, self.page_size) - len(table)
        if missing <= 0:
            return []
        if missing > len(self._free):
            if not table:
                del self._tables[seq_id]
            raise OutOfPages(f"sequence {seq_id} needs {missing} pages, {len(self._free)} free")
        new = [self._free.popleft() for _ in range(missing)]
        table.extend(new)
        return new

    def append_slot(self, seq_id: int, position: int) -> int:
        """Make room for one more token at `position` and return its slot."""
        self.ensure_capacity(seq_id, position + 1)
        return self.slot(seq_id, position)

    def free(self, seq_id: int) -> int:
        """Return every page of `seq_id` to the pool; returns how many."""
        table = self._tables.pop(seq_id, [])
        self._free.extend(table)
        return len(table)

    # -- addressing -----------------------------------------------------
    def slot(self, seq_id: int, position: int) -> int:
        table = self._tables.get(seq_id)
        page_index, offset = divmod(position, self.page_size)
        if table is None or page_index >= len(table) or position < 0:
            raise IndexError(f"sequence {seq_id} has no page for position {position}")
        return table[page_index] * self.page_size + offset

    def slot_mapping(self, seq_id: int, start: int, end: int) -> list[int]:
        """Flat KV slots for positions [start, end) of `seq_id` (pages must exist)."""
        return [self.slot(seq_id, p) for p in range(start, end)]
