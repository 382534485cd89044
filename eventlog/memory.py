"""An in-memory recorder with the same contract as the JetStream one (for pure tests)."""

from __future__ import annotations

import asyncio
import bisect
import datetime
import itertools
import time
from typing import AsyncIterator, Callable, Sequence

from .errors import AtomicBatchUnsupported, BatchTooLarge, ConcurrencyConflict, DuplicateInBatch, JournalFull
from .headers import Header
from .recorder import MAX_BATCH_MESSAGES, Ack, BatchMessage, StoredMessage, StreamStatus

READ_BATCH = 1000   # messages in one list of read_batches (as a direct get's batch)


def _matches(pattern: str | None, subject: str) -> bool:
    if pattern is None:
        return True
    pat, sub = pattern.split("."), subject.split(".")
    for i, token in enumerate(pat):
        if token == ">":
            return len(sub) > i
        if i >= len(sub) or (token != "*" and token != sub[i]):
            return False
    return len(pat) == len(sub)


class MemorySubscription:
    def __init__(self, recorder: "MemoryRecorder", from_seq: int, subject: str | None) -> None:
        self._rec, self._next, self._subject = recorder, max(1, from_seq), subject
        self._closed = False

    def __aiter__(self) -> "MemorySubscription":
        return self

    async def __anext__(self) -> StoredMessage:
        while True:
            if self._closed:
                raise StopAsyncIteration
            while (msg := self._rec._first_from(self._next)) is not None:
                self._next = msg.seq + 1
                if _matches(self._subject, msg.subject):
                    return msg
            async with self._rec._changed:
                if self._rec._last_seq < self._next and not self._closed:
                    await self._rec._changed.wait()

    def take_waiting(self, limit: int) -> list[StoredMessage]:
        """Up to `limit` messages already stored after the last one taken, in order (none once closed)."""
        out: list[StoredMessage] = []
        while len(out) < limit and not self._closed and (msg := self._rec._first_from(self._next)) is not None:
            self._next = msg.seq + 1
            if _matches(self._subject, msg.subject):
                out.append(msg)
        return out

    async def close(self) -> None:
        self._closed = True
        async with self._rec._changed:
            self._rec._changed.notify_all()

    async def __aenter__(self) -> "MemorySubscription":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class MemoryRecorder:
    """Byte accounting counts subject + payload + header bytes, like a stream's stored size.
    `atomic_batches=False` models a stream without allow_atomic (append_batch refuses)."""

    def __init__(
        self, name: str = "AOTX_JOURNAL", *, max_bytes: int | None = None,
        duplicate_window_s: float = 120.0, clock: Callable[[], float] = time.monotonic,
        atomic_batches: bool = True, batch_limit: int = MAX_BATCH_MESSAGES,
    ) -> None:
        self.name, self.max_bytes = name, max_bytes
        self.atomic_batches, self.batch_limit = atomic_batches, batch_limit
        self.duplicate_window_s, self._clock = duplicate_window_s, clock
        self._created = datetime.datetime.now(datetime.timezone.utc)
        self._messages: list[StoredMessage] = []
        self._last_seq = 0
        self._bytes = 0
        self._last_by_subject: dict[str, int] = {}
        self._dedup: dict[str, tuple[int, float]] = {}
        self._changed = asyncio.Condition()

    @staticmethod
    def _size(msg: StoredMessage) -> int:
        return len(msg.subject) + len(msg.data) + sum(len(k) + len(v) for k, v in msg.headers.items())

    def _messages_from(self, seq: int) -> list[StoredMessage]:
        return self._messages[bisect.bisect_left(self._messages, seq, key=lambda m: m.seq):]

    def _first_from(self, seq: int) -> StoredMessage | None:
        i = bisect.bisect_left(self._messages, seq, key=lambda m: m.seq)
        return self._messages[i] if i < len(self._messages) else None

    def _expire(self, now: float) -> None:
        """Drop ids older than the window (the dict is in insertion order: oldest first)."""
        for k, (_, at) in list(itertools.islice(self._dedup.items(), 64)):
            if now - at < self.duplicate_window_s:
                return
            del self._dedup[k]
        if self._dedup and now - next(iter(self._dedup.values()))[1] >= self.duplicate_window_s:
            self._dedup = {k: v for k, v in self._dedup.items() if now - v[1] < self.duplicate_window_s}

    @staticmethod
    def _stored(seq: int, subject: str, payload: bytes, msg_id: str | None, expected: int | None) -> StoredMessage:
        headers = {}
        if msg_id is not None:
            headers[Header.MSG_ID.value] = msg_id
        if expected is not None:
            headers[Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value] = str(expected)
        return StoredMessage(seq, subject, bytes(payload), headers)

    def _check_guard(self, subject: str, expected: int) -> None:
        last = self._last_by_subject.get(subject, 0)
        if last != expected:
            raise ConcurrencyConflict(subject, expected, f"wrong last sequence: {last}")

    def _check_room(self, msgs: list[StoredMessage]) -> None:
        size = sum(self._size(m) for m in msgs)
        if self.max_bytes is not None and self._bytes + size > self.max_bytes:
            raise JournalFull(f"journal full: maximum bytes exceeded ({self._bytes}/{self.max_bytes})")

    async def _store(self, msgs: list[StoredMessage], now: float) -> None:
        for msg in msgs:
            self._messages.append(msg)
            self._last_seq, self._bytes = msg.seq, self._bytes + self._size(msg)
            self._last_by_subject[msg.subject] = msg.seq
            msg_id = msg.headers.get(Header.MSG_ID.value)
            if msg_id is not None:
                self._dedup[msg_id] = (msg.seq, now)
        async with self._changed:
            self._changed.notify_all()

    async def append(
        self, subject: str, payload: bytes, msg_id: str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> Ack:
        now = self._clock()
        self._expire(now)
        if msg_id is not None and msg_id in self._dedup:
            return Ack(self.name, self._dedup[msg_id][0], duplicate=True)
        if expected_last_subject_seq is not None:
            self._check_guard(subject, expected_last_subject_seq)
        msg = self._stored(self._last_seq + 1, subject, payload, msg_id, expected_last_subject_seq)
        self._check_room([msg])
        await self._store([msg], now)
        return Ack(self.name, msg.seq)

    async def append_batch(self, messages: Sequence[BatchMessage]) -> list[Ack]:
        """All or nothing, checked in the server's order: size, message ids, guards, room."""
        if not messages:
            return []
        if not self.atomic_batches:
            raise AtomicBatchUnsupported("atomic publish is disabled on this stream")
        if len(messages) > self.batch_limit:
            raise BatchTooLarge(f"atomic publish batch is too large: {self.batch_limit}")
        guarded = [m.subject for m in messages if m.expected_last_subject_seq is not None]
        if len(guarded) != len(set(guarded)):
            raise ValueError("an atomic batch guards a subject at most once (its first message there)")
        now = self._clock()
        self._expire(now)
        ids = [m.msg_id for m in messages if m.msg_id is not None]
        if len(ids) != len(set(ids)) or any(i in self._dedup for i in ids):
            raise DuplicateInBatch("atomic publish batch contains duplicate message id")
        for m in messages:
            if m.expected_last_subject_seq is not None:
                self._check_guard(m.subject, m.expected_last_subject_seq)
        msgs = [self._stored(self._last_seq + 1 + i, m.subject, m.payload, m.msg_id, m.expected_last_subject_seq)
                for i, m in enumerate(messages)]
        self._check_room(msgs)
        await self._store(msgs, now)
        return [Ack(self.name, m.seq) for m in msgs]

    async def read(self, from_seq: int = 1, subject: str | None = None) -> AsyncIterator[StoredMessage]:
        for msg in self._messages_from(from_seq):
            if _matches(subject, msg.subject):
                yield msg

    async def read_batches(self, from_seq: int = 1) -> AsyncIterator[list[tuple[str, int, bytes]]]:
        messages = [(m.subject, m.seq, m.data) for m in self._messages_from(from_seq)]
        for i in range(0, len(messages), READ_BATCH):
            yield messages[i:i + READ_BATCH]

    async def subscribe(self, from_seq: int = 1, subject: str | None = None, *, headers: bool = True) -> MemorySubscription:
        return MemorySubscription(self, from_seq, subject)

    async def stream_info(self) -> StreamStatus:
        first = self._messages[0].seq if self._messages else self._last_seq + 1
        return StreamStatus(
            name=self.name, created=self._created, messages=len(self._messages), bytes=self._bytes,
            first_seq=first, last_seq=self._last_seq, max_bytes=self.max_bytes,
        )

    async def purge(self) -> None:
        self._messages.clear()
        self._bytes = 0
        self._last_by_subject.clear()

    async def close(self) -> None:
        return None
