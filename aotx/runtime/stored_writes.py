"""StoredWrites: the in-process StoredJournal (aotx.stored.port) over the runtime's one journal writer.

`record` queues a stored command for the stored group commit (aotx.runtime.stored_round; its rounds
take turns with the command and execution rounds under the writer's lock) and answers once it is
applied (Saved) or refused. `reads` answer from the acknowledged projection (stored_reads);
`wait_events` / `wait_key` wake on the notices of applied messages (stored_signals, an observer).
At boot (`booted`) every response and key left unfinished by the previous run is journalled as
interrupted (aotx.stored.recovery), then retention is swept; the sweep runs again every
`sweep_interval` seconds (a `stored.expired` event per identity with something past its time).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Sequence

from ..stored import (AppendResponseEvents, Expire, Reason, Saved, StoredCommand, StoredLimits, StoredOutcome,
                      StoredRefusal, identity_lineage, interruptions)
from ..stored.recovery import expirable
from .group_commit import GroupCommit
from .observers import Observers
from .stopping import cancel_and_wait
from .stored_local import LocalStored
from .stored_reads import StoredView
from .stored_round import StoredWrite, stored_round
from .stored_signals import StoredSignals
from .writer import JournalWriter

log = logging.getLogger("aotx.runtime")
MAX_BATCH = 256          # stored commands decided together
SWEEP_INTERVAL = 60.0    # seconds between retention sweeps
_STOPPED = StoredRefusal(Reason.UNAVAILABLE, "the shared runtime stopped")


class StoredWrites:
    def __init__(self, writer: JournalWriter, observers: Observers, limits: StoredLimits | None = None, *,
                 clock: Callable[[], float] = time.time, sweep_interval: float = SWEEP_INTERVAL) -> None:
        self.writer, self.limits, self.clock = writer, limits or StoredLimits(), clock
        self.sweep_interval = sweep_interval
        self.commit: GroupCommit[StoredWrite] = GroupCommit(writer.lock, self._round, name="stored",
                                                            max_batch=MAX_BATCH)
        self._reads = StoredView(lambda: writer.projector, self.limits, clock)
        self.signals = observers.add(StoredSignals())
        self._sweeper: asyncio.Task | None = None
        # whether this runtime writes a lineage (follow mode: SharedRuntime.writes): boot and the
        # retention sweep journal only what it writes; alone on a journal, every identity
        self.writes: Callable[[bytes], bool] | None = None
        # lease mode: acquires the identity's lineage first (None: may write; else the refusal)
        self.ensure: Callable[[str], Awaitable[str | None]] | None = None
        self._journal: LocalStored | None = None

    def _mine(self, identity: str) -> bool:
        return self.writes is None or self.writes(identity_lineage(identity))

    @property
    def reads(self) -> StoredView:
        return self._reads

    @property
    def journal(self) -> LocalStored:
        """This port as the surfaces use it (aotx.stored.port.StoredJournal: reads awaited)."""
        if self._journal is None:
            self._journal = LocalStored(self)
        return self._journal

    async def _round(self, batch: list[StoredWrite]) -> list[StoredWrite]:
        return await stored_round(self.writer, batch, self.limits, int(self.clock()))

    # ---- StoredJournal ----------------------------------------------------------------------
    async def record(self, identity: str, command: StoredCommand) -> StoredOutcome:
        if self.ensure is not None and (refused := await self.ensure(identity)) is not None:
            return StoredRefusal(Reason.UNAVAILABLE, refused)
        fut = asyncio.get_running_loop().create_future()
        return await self.commit.submit(StoredWrite(identity, command, fut))

    async def append_events(self, identity: str, response_id: str, first: int,
                            events: Sequence[bytes]) -> StoredOutcome:
        return await self.record(identity, AppendResponseEvents(response_id, first, list(events)))

    async def wait_events(self, identity: str, response_id: str, seen: int, timeout: float) -> None:
        await self.signals.wait(identity, "response", response_id,
                                lambda: self._reads.events_ready(identity, response_id, seen), timeout)

    async def wait_key(self, identity: str, surface: str, key: str, seen: int, timeout: float) -> None:
        await self.signals.wait(identity, "key", (surface, key),
                                lambda: self._reads.chunks_ready(identity, surface, key, seen), timeout)

    def on_hold(self) -> bool:
        return self.writer.hold.active

    # ---- lifecycle --------------------------------------------------------------------------
    async def booted(self) -> None:
        """After replay: journal what the previous run left unfinished as interrupted (never run again),
        sweep retention, then keep sweeping. A failure is logged; the next boot tries again."""
        todo = [(identity, cmd) for identity, cmd in interruptions(self._reads.state) if self._mine(identity)]
        outcomes = await asyncio.gather(*(self.record(identity, cmd) for identity, cmd in todo))
        for (identity, cmd), out in zip(todo, outcomes):
            if not isinstance(out, Saved):
                log.warning("could not journal stored %s of %r as interrupted: %s", type(cmd).__name__, identity, out)
        await self.sweep()
        if self.sweep_interval > 0:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def sweep(self) -> int:
        """Journal the expiry of everything past its retention; returns how many identities had some."""
        identities = [i for i in expirable(self._reads.state, int(self.clock()), self.limits) if self._mine(i)]
        outcomes = await asyncio.gather(*(self.record(identity, Expire()) for identity in identities))
        for identity, out in zip(identities, outcomes):
            if not isinstance(out, Saved):
                log.info("stored retention sweep of %r refused: %s", identity, out)
        return len(identities)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            if not self.writer.failed and not self.writer.hold.active:
                try:
                    await self.sweep()
                except Exception:   # a failed round is logged by the group commit; sweep again next time
                    log.warning("stored retention sweep failed", exc_info=True)

    async def stop(self) -> None:
        """Stop sweeping and writing (bounded); every command still queued answers UNAVAILABLE."""
        await cancel_and_wait([self._sweeper], what="stored retention sweep")
        self._sweeper = None
        await self.commit.stop(_STOPPED)
