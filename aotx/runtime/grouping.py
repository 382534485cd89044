"""Execution groups: which queued inputs the next lease admits, within a conservative page budget.

The budget is the KV pool's pages minus what is already promised: the engine's current page
owners and pending page requests (every request not yet ended, stateless surfaces included, at
its conservative reservation prompt + max_tokens) and the bound of each input already leased
but not yet handed to the engine. Each queued input counts its own bound (never more than its
page limit). Inputs are taken in admission order and the first that does not fit stops the
group, so no input is overtaken; the rest stay queued until a later group. An input always
fits a pool where nothing else is promised (its bound is at most its page limit, at most the
page grant, at most the pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Candidate:
    lineage: bytes
    sequence: int
    pages: int          # conservative bound of the pages it will hold


def page_budget(pool_pages: int, engine_committed: int, leased_unsubmitted: int) -> int:
    return max(0, pool_pages - engine_committed - leased_unsubmitted)


def next_group(queue: Sequence[Candidate], budget: int) -> int:
    """How many inputs at the head of `queue` the next group admits (0: none fit yet)."""
    n = 0
    for c in queue:
        if c.pages > budget:
            break
        budget -= c.pages
        n += 1
    return n
