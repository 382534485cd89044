"""Execution groups: which queued inputs the next lease admits, within the KV page pool.

Inputs and stateless requests stand in one admission line (aotx.engine.scheduler): each queued
input claims its conservative bound (its prompt + what recall could add + its output budget, in
pages, never more than its page limit) at its place in the line, the moment its admission was
queued. A claim counts what arrived before it (running reservations, earlier requests still
waiting, the claims of inputs leased but not yet handed to the engine); requests that arrive after
a claimant that does not fit yet are admitted only into the pages its claim leaves free, so the
pool drains to where it fits and a stream of stateless traffic cannot keep it out. Inputs are
taken in admission order and the first whose claim is refused stops the group, so no input is
overtaken; the rest stay queued until a later group. An input always fits a pool where nothing
else is promised (its bound is at most its page limit, at most the page grant, at most the pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    lineage: bytes
    sequence: int
    pages: int          # conservative bound of the pages it will hold
    since: float = 0.0  # its place in the admission line (time.monotonic when it was queued)


def claim_group(queue: Sequence[Candidate], claim: Callable[[Candidate], Optional[T]]) -> list[T]:
    """The claims of the head of `queue` in admission order, up to the first `claim` refuses (that
    one and those behind it stay queued; the refused one holds later arrivals back)."""
    claims: list[T] = []
    for candidate in queue:
        got = claim(candidate)
        if got is None:
            break
        claims.append(got)
    return claims
