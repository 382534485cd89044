"""Boot: replay the journal into a projector, then close what this runtime will never finish.

`replay` feeds every journal message from `from_seq` on through the recovery Reassembler and the
same apply as live writes (aotx.projection.Projector), in batches, with a progress bar on
stderr. It starts from a fresh projector at sequence 1 by default, or from a given projector that
already covers the log up to `from_seq - 1` (a snapshot's: the runtime's `boot_start` supplies a
`BootPoint`). A start of another stream (name or incarnation) is refused (ReplayError), as is one
beyond the log's end. `snapshot_start(keeper, capacities)` is the start a SnapshotKeeper supplies:
the newest valid snapshot's projector and the sequence after it, else a fresh projector at 1.

`interrupt_unfinished`: an admission without a completion (this runtime never runs it again) is
journalled `interrupted` through the execution journal, so its receipt gets a saved terminal result.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional, Protocol

from tqdm import tqdm

from eventlog import Recorder, StreamStatus

from ..state import Capacities, State
from ..state.execution import InputCompleted
from ..state.vocab import Execution
from .execution_port import ExecutionJournal
from ..projection import Projector, ReplayError

log = logging.getLogger("aotx.runtime")
REPLAY_BATCH = 256   # journal messages fed to the projector at once


@dataclass(frozen=True)
class BootPoint:
    """Where a boot starts reading: `projector` covers the log before `from_seq` (None: a fresh one)."""

    projector: Optional[Projector] = None
    from_seq: int = 1


# what supplies a start other than a fresh projector at sequence 1 (e.g. the newest valid snapshot)
StartPoint = Callable[[Recorder], Awaitable[BootPoint]]


class SnapshotSource(Protocol):
    """What `snapshot_start` needs (aotx.snapshot.SnapshotKeeper)."""

    async def boot(self, info: StreamStatus, fresh: Projector) -> tuple[Projector, int]: ...


def snapshot_start(snapshots: SnapshotSource, capacities: Capacities) -> StartPoint:
    """The boot start of a snapshot keeper: `keeper.boot(stream info, a fresh projector)` answers the
    newest valid snapshot's projector and the sequence after it, or the fresh one and 1."""
    async def start(recorder: Recorder) -> BootPoint:
        info = await recorder.stream_info()
        fresh = Projector(source=info.name, incarnation=info.created.isoformat(), capacities=capacities)
        projector, from_seq = await snapshots.boot(info, fresh)
        return BootPoint(projector, from_seq)
    return start


async def replay(recorder: Recorder, capacities: Capacities | None = None, *, progress: bool = True,
                 projector: Projector | None = None, from_seq: int = 1,
                 on_progress: Callable[[int, int], None] | None = None) -> Projector:
    """The projector of the whole log: `projector` (default: a fresh one, of this stream, with
    `capacities`) fed every message from `from_seq` on, then checked complete (a transfer left
    partial fails closed). `on_progress(applied, total)` after every batch (the replay gauges)."""
    info = await recorder.stream_info()
    incarnation = info.created.isoformat()
    proj = projector
    if proj is None:
        proj = Projector(source=info.name, incarnation=incarnation, capacities=capacities)
        if from_seq != 1:
            raise ReplayError(f"a fresh projector replays from sequence 1, not {from_seq}")
    elif (proj.source, proj.incarnation) != (info.name, incarnation):
        raise ReplayError(f"the boot start is of stream {proj.source} ({proj.incarnation}), "
                          f"not of {info.name} ({incarnation})")
    if not 1 <= from_seq <= info.last_seq + 1:
        raise ReplayError(f"the boot start reads from sequence {from_seq}; the log ends at {info.last_seq}")
    total = info.messages if from_seq == 1 else info.last_seq - from_seq + 1
    # the cyclic collector paused for the whole replay, its reads too (feed_many pauses it per batch; the
    # read's allocations between batches still triggered ~2.5 % of a replay's CPU in young passes over a
    # growing state that makes no cycles), and restored after it, whatever happens
    collecting = gc.isenabled()
    gc.disable()
    try:
        with tqdm(total=total, desc="aotx journal replay", unit="msg", file=sys.stderr,
                  disable=not progress, leave=False) as bar:
            done = 0
            report = on_progress or (lambda applied, of: None)
            report(0, total)
            async for messages in recorder.read_batches(from_seq):   # (subject, seq, data), a read's batch at a time
                for i in range(0, len(messages), REPLAY_BATCH):
                    batch = messages[i:i + REPLAY_BATCH]
                    done += len(batch)
                    bar.update(proj.feed_many(batch))
                    report(done, total)
    finally:
        if collecting:
            gc.enable()
    proj.finish()
    return proj


def unfinished_inputs(state: State) -> list[tuple[bytes, int]]:
    """(lineage, sequence) of every admitted input without a terminal execution."""
    out = []
    for slot, record in enumerate(state.executions):
        if record is None or record.status.terminal:
            continue
        row = state.receipts[slot]
        out.append((row["lineage"].tobytes(), int(row["sequence"])))
    return out


async def interrupt_unfinished(state: State, journal: ExecutionJournal) -> None:
    """Journal every unfinished input `interrupted` (all at once: one round); a failure is logged
    (the input stays unfinished, and the next boot tries again)."""
    await interrupt_inputs(unfinished_inputs(state), journal)


RESTARTED = "the runtime restarted before this input finished; it is not executed again"


async def interrupt_inputs(unfinished: list[tuple[bytes, int]], journal: ExecutionJournal,
                           error: str = RESTARTED) -> None:
    """Journal these inputs (lineage, sequence) `interrupted`, all at once; a failure is logged."""
    failures = await asyncio.gather(*(journal.journal(lineage, [InputCompleted(
        lineage, sequence, Execution.INTERRUPTED, output_tokens=0, finish="interrupted",
        error=error)])
        for lineage, sequence in unfinished))
    for (lineage, sequence), failure in zip(unfinished, failures):
        if failure is not None:
            log.warning("could not journal input %s/%d as interrupted: %s", lineage.hex(), sequence, failure.body)
