"""An in-memory recorder with the same contract as the JetStream one (for pure tests)."""

from __future__ import annotations

import asyncio
import bisect
import datetime
import time
from typing import AsyncIterator, Callable

from .errors import ConcurrencyConflict, JournalFull
from .headers import Header
from .recorder import Ack, StoredMessage, StreamStatus


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

    async def close(self) -> None:
        self._closed = True
        async with self._rec._changed:
            self._rec._changed.notify_all()

    async def __aenter__(self) -> "MemorySubscription":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class MemoryRecorder:
    """Byte accounting counts subject + payload + header bytes, like a stream's stored size."""

    def __init__(
        self, name: str = "AOTX_JOURNAL", *, max_bytes: int | None = None,
        duplicate_window_s: float = 120.0, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.max_bytes = name, max_bytes
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

    async def append(
        self, subject: str, payload: bytes, msg_id: str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> Ack:
        now = self._clock()
        self._dedup = {k: v for k, v in self._dedup.items() if now - v[1] < self.duplicate_window_s}
        if msg_id is not None and msg_id in self._dedup:
            return Ack(self.name, self._dedup[msg_id][0], duplicate=True)
        if expected_last_subject_seq is not None:
            last = self._last_by_subject.get(subject, 0)
            if last != expected_last_subject_seq:
                raise ConcurrencyConflict(subject, expected_last_subject_seq, f"wrong last sequence: {last}")
        headers = {}
        if msg_id is not None:
            headers[Header.MSG_ID.value] = msg_id
        if expected_last_subject_seq is not None:
            headers[Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value] = str(expected_last_subject_seq)
        msg = StoredMessage(self._last_seq + 1, subject, bytes(payload), headers)
        if self.max_bytes is not None and self._bytes + self._size(msg) > self.max_bytes:
            raise JournalFull(f"journal full: maximum bytes exceeded ({self._bytes}/{self.max_bytes})")
        self._messages.append(msg)
        self._last_seq, self._bytes = msg.seq, self._bytes + self._size(msg)
        self._last_by_subject[subject] = msg.seq
        if msg_id is not None:
            self._dedup[msg_id] = (msg.seq, now)
        async with self._changed:
            self._changed.notify_all()
        return Ack(self.name, msg.seq)

    async def read(self, from_seq: int = 1, subject: str | None = None) -> AsyncIterator[StoredMessage]:
        for msg in self._messages_from(from_seq):
            if _matches(subject, msg.subject):
                yield msg

    async def subscribe(self, from_seq: int = 1, subject: str | None = None) -> MemorySubscription:
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
