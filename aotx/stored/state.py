"""The stored state (the projection of the STORED transfers): per identity a Book of responses,
conversations and idempotency-key records, plus totals for the limits.

Records are frozen values; apply (aotx.stored.apply) replaces a record, never changes one in place.
That makes a fork cheap: `state.fork()` shares every Book and record with the state it came from and
copies a Book (three dict copies) the first time an event of that identity is applied to the fork —
which is how a round decides several commands of one identity, each against the ones before it,
without touching the acknowledged state (aotx.runtime.stored_round).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .events import ConversationCreated, KeyFinished, KeyStarted, ResponseCreated, ResponseFinished
from .vocab import ResponseStatus


@dataclass(frozen=True)
class ResponseRecord:
    created: ResponseCreated                 # the request's fields, as journalled
    status: ResponseStatus
    events: tuple[bytes, ...] = ()           # stream events, sequence_number = index
    finished: Optional[ResponseFinished] = None
    cancel_requested: bool = False
    size: int = 0                            # bytes counted against the byte limit


@dataclass(frozen=True)
class ConversationRecord:
    id: str
    created_at: int
    metadata: bytes
    item_ids: tuple[str, ...]
    items: tuple[bytes, ...]
    size: int = 0


@dataclass(frozen=True)
class KeyRecord:
    started: KeyStarted
    chunks: tuple[bytes, ...] = ()
    finished: Optional[KeyFinished] = None
    size: int = 0


@dataclass
class Book:
    """One identity's records, in the order they were created."""

    responses: dict[str, ResponseRecord] = field(default_factory=dict)
    conversations: dict[str, ConversationRecord] = field(default_factory=dict)
    keys: dict[tuple[str, str], KeyRecord] = field(default_factory=dict)   # (surface, key) ->

    def copy(self) -> "Book":
        return Book(dict(self.responses), dict(self.conversations), dict(self.keys))

    def __bool__(self) -> bool:
        return bool(self.responses or self.conversations or self.keys)


@dataclass(frozen=True)
class Totals:
    """What the limits count, over every identity."""

    responses: int = 0
    conversations: int = 0
    keys: int = 0
    items: int = 0          # conversation items
    bytes: int = 0


EMPTY_BOOK = Book()


@dataclass
class StoredState:
    books: dict[str, Book] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)
    applied: int = 0        # stored events applied (not part of the digest)
    _owned: Optional[set[str]] = field(default=None, repr=False, compare=False)   # None: every Book is own

    def book(self, identity: str) -> Book:
        """The identity's records for reading (an empty Book for an unknown identity)."""
        return self.books.get(identity, EMPTY_BOOK)

    def writable_book(self, identity: str) -> Book:
        """The identity's Book, this state's own (copied first in a fork), created if absent."""
        book = self.books.get(identity)
        if book is None:
            book = self.books[identity] = Book()
            if self._owned is not None:
                self._owned.add(identity)
        elif self._owned is not None and identity not in self._owned:
            book = self.books[identity] = book.copy()
            self._owned.add(identity)
        return book

    def count(self, responses: int = 0, conversations: int = 0, keys: int = 0, items: int = 0,
              bytes: int = 0) -> None:
        """Add to the totals (once per applied event: built positionally, not by dataclasses.replace)."""
        t = self.totals
        self.totals = Totals(t.responses + responses, t.conversations + conversations, t.keys + keys,
                             t.items + items, t.bytes + bytes)

    def fork(self) -> "StoredState":
        """A state equal to this one that applies events without changing it (copy on first write)."""
        return StoredState(dict(self.books), self.totals, self.applied, set())

    def drop_empty(self, identity: str) -> None:
        if not self.books.get(identity, True):
            del self.books[identity]
            if self._owned is not None:
                self._owned.discard(identity)


def response_size(created: ResponseCreated) -> int:
    return (len(created.model) + sum(map(len, created.input)) + len(created.instructions) + len(created.tools)
            + len(created.params) + len(created.metadata))


def finished_size(finished: ResponseFinished) -> int:
    return sum(map(len, finished.output)) + len(finished.usage) + len(finished.error) + len(finished.incomplete_details)


def conversation_size(created: ConversationCreated) -> int:
    return len(created.metadata) + sum(map(len, created.items))
