"""Grown: an immutable sequence that appends in amortised O(1) — what a record's events, a key's chunks and
a conversation's items are, so that a long run's appends cost what they append, not what was there.

A Grown is a view of the first `n` items of a list that only ever grows. `plus(more)` extends that list
in place when this view is its tip (nobody appended past `n`), or when the items past `n` are already
`more` (equal): the same events applied first to a round's fork and then, decoded from the log, to the
acknowledged state. Otherwise (a fork whose write never landed, then other events) it copies its first
`n` items into a new list (counted in `Grown.copied`). Every view keeps showing exactly its own items
whatever grows later, so apply stays pure: a fork's appends are never seen by the state it came from.
Compares equal to a tuple of the same items (and hashes like one); slices are tuples.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, overload


class Grown(Sequence):
    __slots__ = ("_items", "_n")
    copied = 0          # items copied because a view grew where another had grown already (tests)

    def __init__(self, items: Sequence = ()) -> None:
        self._items = list(items)
        self._n = len(self._items)

    @classmethod
    def _view(cls, items: list, n: int) -> Grown:
        view = object.__new__(cls)
        view._items, view._n = items, n
        return view

    def plus(self, more: Sequence) -> Grown:
        """This sequence and then `more`."""
        if not more:
            return self
        items, n, k = self._items, self._n, len(more)
        if len(items) > n and (len(items) < n + k or items[n:n + k] != list(more)):
            Grown.copied += n
            items = items[:n]
        if len(items) == n:
            items.extend(more)
        return Grown._view(items, n + k)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, at: int) -> Any: ...
    @overload
    def __getitem__(self, at: slice) -> tuple: ...

    def __getitem__(self, at: int | slice) -> Any:
        if isinstance(at, slice):
            return tuple(self._items[slice(*at.indices(self._n))])
        if not -self._n <= at < self._n:
            raise IndexError("Grown index out of range")
        return self._items[at % self._n]

    def __iter__(self) -> Iterator:
        return islice(self._items, self._n)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Grown, tuple)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Grown({tuple(self)!r})"


def grown(current: Sequence, more: Sequence) -> Grown | tuple:
    """`current` then `more`, as a Grown (a tuple stays a tuple while nothing is added)."""
    if not more:
        return current if isinstance(current, (Grown, tuple)) else tuple(current)
    return (current if isinstance(current, Grown) else Grown(current)).plus(more)
