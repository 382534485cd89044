"""An input's journal writes, through the executor's port (aotx.runtime.execution_port).

Each call is one write. What a read-back after an unacknowledged write already applied is not
written again; on a journal hold the write waits for the hold to lift and goes on where it stood.
The input's memory input rides with its next write after the lease, ahead of it (its prompt never
depends on its own memory). Where its prompt was built before its embedding was there (nothing to
recall: `Running.memory_later`), an output write does not wait for the vector: the memory input goes
with the first write after the embedding came, and the input's end (its completion) awaits it. So it
is in the log exactly once, at the latest with the input's end, possibly after some of its output.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..memory import MemoryRetained
from ..state import Execution
from ..state.execution import InputCompleted, LeaseApplied, OutputAppended
from .execution_port import ExecutionJournal, ProjectionReads
from .running import Running

log = logging.getLogger("aotx.runtime.executor")


class InputJournal:
    def __init__(self, journal: ExecutionJournal, reads: ProjectionReads, stopping: Callable[[], bool]) -> None:
        self.port, self.reads, self.stopping = journal, reads, stopping

    def landed(self, run: Running, event: Any) -> bool:
        """Is `event` already in the state (a read-back after an unacknowledged write found it)?"""
        state = self.reads.state
        if isinstance(event, LeaseApplied):
            return all((r := state.executions[state.receipt_slot(row.actor, row.sequence)]) is not None
                       and r.status is not Execution.QUEUED for row in event.lease.rows)
        if isinstance(event, MemoryRetained):
            return self.reads.memory.has_retained(event.op.lineage, event.op.operation)
        record = run.record(state)
        if record is None:
            return False
        if isinstance(event, OutputAppended):
            return len(record.output) >= event.offset + len(event.data)
        return record.status.terminal

    async def write(self, run: Running, *events: Any) -> bool:
        """Journal an input's events in one write; False when they could not be (the next boot then
        marks the input interrupted)."""
        todo = list(events)
        leasing = any(isinstance(e, LeaseApplied) for e in todo)
        later = run.memory_later
        if later is not None and not leasing and (later.ready or any(isinstance(e, InputCompleted) for e in todo)):
            run.memory_later = None   # the vector is there (or this is the input's end: it waits for it)
            run.memory_event = await later.event()
        with_memory = run.memory_event is not None and not leasing
        if with_memory:
            todo.insert(0, run.memory_event)
        names = "+".join(type(e).__name__ for e in todo)
        while True:
            todo = [e for e in todo if not self.landed(run, e)]
            if not todo:
                break
            failure = await self.port.journal(run.lineage, todo)
            if failure is None:
                break
            if failure.status == 429 and not self.stopping():
                log.info("input %s/%d: journal on hold; %s waits for it to lift", run.lineage.hex(), run.sequence,
                         names)
                if await self.port.writable():
                    continue
            if all(self.landed(run, e) for e in todo):
                break
            log.warning("input %s/%d: journalling %s failed (%s); the next boot marks it interrupted",
                        run.lineage.hex(), run.sequence, names, failure.body)
            return False
        if with_memory:
            run.memory_event, run.retained = None, True
        return True
