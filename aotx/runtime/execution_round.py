"""Execution writes: the runtime's side of the executor's journal port (aotx.runtime.execution_port).

Every execution write (lease, memory, output, completion) queued while a round was in flight joins
the next round (the same group commit as commands, aotx.runtime.group_commit); its transfers are
packed per lineage into shared ticks (≤ 16 records each, aotx.runtime.ticks) and appended in order
by the journal writer — one append and one fsync for many inputs' output. A write is answered None
when the tick completing its last transfer landed, else with the refusal.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

from .group_commit import GroupCommit, answer
from .outcome import Outcome
from .ticks import encode_ticks
from .writer import JournalWriter


@dataclass(eq=False)
class ExecWrite:
    lineage: bytes
    events: list
    future: asyncio.Future


async def execution_round(writer: JournalWriter, batch: list[ExecWrite]) -> None:
    """One round of execution writes: per lineage one flight, a boot control record first when this
    boot has not written the lineage yet."""
    refused = await writer.unready()
    if refused is not None:
        return answer(batch, refused)
    assert writer.projector is not None
    by_lineage: dict[bytes, list[ExecWrite]] = {}
    for item in batch:
        by_lineage.setdefault(item.lineage, []).append(item)
    plans = []
    for lineage, items in by_lineage.items():
        ticks, where = encode_ticks(writer.projector, writer.boot_id, lineage, [i.events for i in items])
        plans.append((writer.flight(lineage, ticks), items, where))
    flights = [f for f, _, _ in plans]
    if not await writer.write(flights):
        return answer(batch, writer.failed_outcome())
    for f, items, where in plans:
        for item, at in zip(items, where):
            if not item.future.done():
                item.future.set_result(None if at < len(f.landed) else (f.error or writer.failed_outcome()))
    await writer.settle(flights)


class ExecutionWrites:
    """The ExecutionJournal port over the writer: journal these events; wait until the hold lifts."""

    def __init__(self, writer: JournalWriter, probe_interval: float) -> None:
        self.writer, self.probe_interval = writer, probe_interval
        self.commit: GroupCommit[ExecWrite] = GroupCommit(writer.lock, self._round, name="execution journal")

    async def _round(self, batch: list[ExecWrite]) -> None:
        await execution_round(self.writer, batch)

    async def journal(self, lineage: bytes, events: Sequence[Any]) -> Outcome | None:
        """Append execution transfers on a lineage's subject and apply them once acknowledged. None
        when all landed, else the refusal (429 on a hold, 503 when the runtime stopped)."""
        fut = asyncio.get_running_loop().create_future()
        return await self.commit.submit(ExecWrite(lineage, list(events), fut))

    async def writable(self) -> bool:
        """Wait until no hold is left (probing the log); False once the runtime stopped for good."""
        while not self.writer.failed and not await self.writer.probe():
            await asyncio.sleep(self.probe_interval)
        return not self.writer.failed
