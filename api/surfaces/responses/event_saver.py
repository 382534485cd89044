"""Saving a background run's stream events on the journal, in order and in batches.

The run adds its events as the engine produces them; one append is in flight at a time, and every
event produced while it was in flight goes in the next one (StoredJournal.append_events — the runtime
packs the appends of many runs of one round into one journal append and fsync), so a run costs one
append per journal round, never one per token. An event's `sequence_number` is its index in the
saved stream: the saver appends them all, in the order added, or stops at the first refusal.

A journal hold does not lose a run: a write refused with Reason.HOLD is tried again (backoff up to
RETRY_MAX seconds) until the hold lifts; any other refusal stops the saver (`refusal`), and the run
finishes as failed with it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Iterable

from aotx.stored import Reason, StoredOutcome, StoredRefusal
from aotx.stored.port import StoredJournal

log = logging.getLogger("aotx.background")
MAX_APPEND_BYTES = 256 * 1024     # one append's events (the stored core takes ≤ 1 MiB per command)
RETRY_FIRST, RETRY_MAX = 0.05, 1.0


async def retrying(write: Callable[[], Awaitable[StoredOutcome]], what: str) -> StoredOutcome:
    """`write()` again while the journal is on hold; the first other answer."""
    delay = RETRY_FIRST
    while True:
        out = await write()
        if not (isinstance(out, StoredRefusal) and out.reason is Reason.HOLD):
            return out
        if delay == RETRY_FIRST:
            log.info("journal hold: %s waits for it to lift (%s)", what, out.message)
        await asyncio.sleep(delay)
        delay = min(RETRY_MAX, delay * 2)


class EventSaver:
    def __init__(self, port: StoredJournal, identity: str, response_id: str) -> None:
        self.port, self.identity, self.response_id = port, identity, response_id
        self.saved = 0                                  # events in the journal (the next sequence_number)
        self.refusal: StoredRefusal | None = None
        self._pending: list[bytes] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"aotx-save-{response_id}")

    def add(self, events: Iterable[bytes]) -> None:
        if self.refusal is None:
            self._pending.extend(events)
            if self._pending:
                self._wake.set()

    def _take(self) -> list[bytes]:
        size = n = 0
        for data in self._pending:
            if n and size + len(data) > MAX_APPEND_BYTES:
                break
            size, n = size + len(data), n + 1
        batch, self._pending = self._pending[:n], self._pending[n:]
        return batch

    async def _run(self) -> None:
        while True:
            if self._pending:
                batch = self._take()
                try:
                    out = await retrying(lambda: self.port.append_events(self.identity, self.response_id,
                                                                         self.saved, batch),
                                         f"response {self.response_id}")
                except Exception as exc:   # the port failed unexpectedly: the run ends failed, saying so
                    log.exception("saving the events of background response %s failed", self.response_id)
                    out = StoredRefusal(Reason.UNAVAILABLE, f"the journal write failed: {exc}")
                if isinstance(out, StoredRefusal):
                    log.warning("the events of background response %s could not be saved: %s",
                                self.response_id, out.message)
                    self.refusal, self._pending = out, []
                    return
                self.saved += len(batch)
            elif self._closing:
                return
            else:
                await self._wake.wait()
                self._wake.clear()

    async def close(self) -> StoredRefusal | None:
        """Save what is left; the refusal that stopped the saver, if one did."""
        self._closing = True
        self._wake.set()
        await self._task
        return self.refusal
