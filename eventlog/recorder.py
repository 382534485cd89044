"""The recorder protocol: a small append-only log interface, and its value types."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from types import MappingProxyType
from typing import AsyncIterator, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

MAX_BATCH_MESSAGES = 1000   # nats-server's default ceiling of messages in one atomic batch (jetstream.limits.batch)


@dataclass(frozen=True)
class Ack:
    """What the log acknowledged: stream name, stream sequence, whether it was a duplicate."""

    stream: str
    seq: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message of an atomic batch: as append's arguments."""

    subject: str
    payload: bytes
    msg_id: str | None = None
    expected_last_subject_seq: int | None = None


NO_HEADERS: Mapping[str, str] = MappingProxyType({})   # a message read without its headers (read-only, shared)


class StoredMessage(NamedTuple):
    """One stored message. A tuple: a follower makes one a message it hears, thousands a second (eventlog.
    followed_runs makes them with `tuple.__new__`)."""

    seq: int
    subject: str
    data: bytes
    headers: Mapping[str, str] = NO_HEADERS


@dataclass(frozen=True)
class StreamStatus:
    """`created` identifies the file incarnation: a deleted and recreated stream gets a new one."""

    name: str
    created: datetime.datetime
    messages: int
    bytes: int
    first_seq: int
    last_seq: int
    max_bytes: int | None


@runtime_checkable
class Subscription(Protocol):
    def __aiter__(self) -> AsyncIterator[StoredMessage]: ...
    async def __anext__(self) -> StoredMessage: ...
    async def close(self) -> None: ...


@runtime_checkable
class Recorder(Protocol):
    """Append with dedup and optimistic concurrency; read and follow from a position.

    append raises ConcurrencyConflict, JournalFull or JournalUnavailable (eventlog.errors).
    expected_last_subject_seq=0 means "the subject holds no message yet"; None skips the check.

    Optional, in two halves: a recorder CLASS that defines `send_append` (JetStreamRecorder) and whose
    `sends_appends` is true takes `await send_append(...)` (sent now) then `await append_sent(that, subject,
    guard)` (its Ack) for what `append` does, so several appends are in flight without a task each. It
    is looked up on the class, not the instance: a wrapper that changes `append` (and delegates the
    rest) keeps every append going through its own `append`.
    """

    async def append(
        self, subject: str, payload: bytes, msg_id: str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> Ack: ...

    atomic_batches: bool
    """Whether append_batch is atomic here (False: the stream does not allow atomic publish)."""

    batch_limit: int
    """The most messages append_batch takes in one batch."""

    async def append_batch(self, messages: Sequence[BatchMessage]) -> list[Ack]:
        """All or nothing: every message lands, in order, at consecutive stream sequences (one ack,
        one fsync), or none does. Each message's guard is checked against the log before the batch;
        at most one message per subject may carry one (ValueError otherwise): it covers that
        subject's messages of the batch, since they land together. Raises ConcurrencyConflict (one
        wrong guard refuses the whole batch; its subject may be None: the log need not say which),
        DuplicateInBatch (a message id already stored, or twice: a batch is never answered as a
        duplicate), BatchTooLarge (over batch_limit), JournalFull, MessageTooLarge,
        JournalUnavailable (the batch may or may not have landed), AtomicBatchUnsupported."""
        ...

    def read(self, from_seq: int = 1, subject: str | None = None) -> AsyncIterator[StoredMessage]:
        """Messages with seq >= from_seq that exist now, in order; then stops."""
        ...

    def read_batches(self, from_seq: int = 1) -> AsyncIterator[list[tuple[str, int, bytes]]]:
        """`read(from_seq)` of every subject, as lists of (subject, seq, data) in order (no headers):
        the bulk read of a replay."""
        ...

    async def subscribe(self, from_seq: int = 1, subject: str | None = None, *, headers: bool = True) -> Subscription:
        """Like read, then keeps following new messages until closed. `headers=False`: the reader needs
        none (a recorder may then leave each message's `headers` empty)."""
        ...

    async def stream_info(self) -> StreamStatus: ...

    async def close(self) -> None: ...
