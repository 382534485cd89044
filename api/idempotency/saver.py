"""Saving a keyed first attempt's answer on the journal, as it is produced.

`add(chunk)` never waits: chunks (the buffered JSON, or a stream's SSE events, exactly as the
client gets them) accumulate while the previous append is in flight, then go as one
AppendKeyAnswer (at most BATCH_BYTES each), so a stream costs one append per journal round, not
one per token. `finish(status, headers)` saves what is left and records FinishKey; `release()`
records that the attempt was refused before it ran (KeyEnd.RELEASED: nothing saved, the key free
again). A write refused by a journal hold (or an unavailable runtime) is tried again, backing off,
for up to RETRY_FOR seconds: the hold lifts by itself. A write the core refuses for good (the byte
budget full, the key finished elsewhere) stops the saving: the key is finished INTERRUPTED, so a
repeat is told the answer was not kept — never given a partial one as if it were whole.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Mapping, Optional

from aotx.stored import AppendKeyAnswer, FinishKey, KeyEnd, Reason, Saved, StoredRefusal
from aotx.stored.commands import StoredCommand
from aotx.stored.port import StoredJournal

log = logging.getLogger("aotx.idempotency")
BATCH_BYTES = 256 * 1024      # one append's chunks (the core refuses one command over command_bytes, 1 MiB)
RETRY_FOR = 60.0              # seconds a write refused by a hold is tried again
_TRANSIENT = (Reason.HOLD, Reason.UNAVAILABLE)
INTERRUPTED_STATUS = 409


class AnswerSaver:
    def __init__(self, port: StoredJournal, identity: str, surface: str, key: str) -> None:
        self.port, self.identity, self.surface, self.key = port, identity, surface, key
        self.saved = 0                          # chunks the journal holds
        self.broken: Optional[StoredRefusal] = None
        self._pending: list[bytes] = []
        self._flight: Optional[asyncio.Task] = None

    # ---- while the answer is produced -----------------------------------------------------
    def add(self, chunk: bytes) -> None:
        if self.broken is not None or not chunk:
            return
        self._pending.append(chunk)
        if self._flight is None or self._flight.done():
            self._flight = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending and self.broken is None:
            batch, size = [], 0
            while self._pending and (not batch or size + len(self._pending[0]) <= BATCH_BYTES):
                size += len(self._pending[0])
                batch.append(self._pending.pop(0))
            out = await self._record(AppendKeyAnswer(self.surface, self.key, self.saved, batch))
            if isinstance(out, Saved):
                self.saved += len(batch)
            else:
                self.broken = out
                log.warning("idempotency key answer not saved; the key ends interrupted",
                            extra={"fields": {"surface": self.surface, "reason": out.reason.word,
                                              "message": out.message}})

    async def _record(self, command: StoredCommand):
        """Record a command, trying again while the journal is on hold (bounded)."""
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + RETRY_FOR, 0.05
        while True:
            out = await self.port.record(self.identity, command)
            if isinstance(out, Saved) or out.reason not in _TRANSIENT or loop.time() + pause > deadline:
                return out
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    async def _flushed(self) -> None:
        while self._flight is not None and not self._flight.done():
            await asyncio.shield(self._flight)
        if self._pending and self.broken is None:
            self._flight = asyncio.get_running_loop().create_task(self._drain())
            await asyncio.shield(self._flight)

    # ---- the end ------------------------------------------------------------------------
    async def finish(self, status: int, headers: Mapping[str, str]) -> bool:
        """Save the rest and finish the key; True when the whole answer is kept."""
        await self._flushed()
        if self.broken is not None:
            await self._end(INTERRUPTED_STATUS, {}, KeyEnd.INTERRUPTED)
            return False
        return await self._end(status, headers, KeyEnd.COMPLETE)

    async def interrupt(self) -> None:
        """The answer could not be produced to its end after it began (it fails mid-way): keep nothing."""
        await self._flushed()
        await self._end(INTERRUPTED_STATUS, {}, KeyEnd.INTERRUPTED)

    async def release(self, status: int) -> None:
        """Refused before it ran: the key is free again."""
        await self._end(status, {}, KeyEnd.RELEASED)

    async def _end(self, status: int, headers: Mapping[str, str], end: KeyEnd) -> bool:
        out = await self._record(FinishKey(self.surface, self.key, status, dict(headers), end))
        if not isinstance(out, Saved):
            log.warning("idempotency key not finished (a restart finishes it interrupted)",
                        extra={"fields": {"surface": self.surface, "end": end.name.lower(),
                                          "reason": out.reason.word, "message": out.message}})
            return False
        return True
