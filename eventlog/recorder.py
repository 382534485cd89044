"""The recorder protocol: a small append-only log interface, and its value types."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import AsyncIterator, Protocol, runtime_checkable


@dataclass(frozen=True)
class Ack:
    """What the log acknowledged: stream name, stream sequence, whether it was a duplicate."""

    stream: str
    seq: int
    duplicate: bool = False


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


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
    """

    async def append(
        self, subject: str, payload: bytes, msg_id: str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> Ack: ...

    def read(self, from_seq: int = 1, subject: str | None = None) -> AsyncIterator[StoredMessage]:
        """Messages with seq >= from_seq that exist now, in order; then stops."""
        ...

    async def subscribe(self, from_seq: int = 1, subject: str | None = None) -> Subscription:
        """Like read, then keeps following new messages until closed."""
        ...

    async def stream_info(self) -> StreamStatus: ...

    async def close(self) -> None: ...
