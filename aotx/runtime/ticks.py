"""Tick encoding: a lineage's events of one round as transfers packed into Emitter ticks.

One function for commands and execution alike: per lineage one Emitter continuing the lineage's
transfer ids, a boot control record first when this boot has not written the lineage yet, then
every group's events (a command's, or one execution write's) as transfers; ≤ 16 records a tick.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..journal import Emitter, Tick, TransferKind, lineage_hash
from ..journal.transfer import pack_body
from ..memory import MemoryRetained, memory_event_body
from ..state import encode_event, transfer_kind
from ..state.execution import TRANSFER_KIND, execution_body
from ..projection import Projector, boot_control_body


def transfer_of(event: Any) -> tuple[int, bytes]:
    """An event's transfer kind and msgpack payload: a mutation or retirement (aotx.state), an
    input's retained memory (aotx.memory) or an execution event (aotx.state.execution)."""
    if isinstance(event, MemoryRetained):
        return int(TransferKind.MEMORY), pack_body(memory_event_body(event))
    kind = TRANSFER_KIND.get(type(event))
    if kind is not None:
        return int(kind), pack_body(execution_body(event))
    return transfer_kind(event), encode_event(event)


def encode_ticks(projector: Projector, boot_id: str, lineage: bytes, groups: Iterable[Sequence[Any]],
                 *, whole: bool = False, chain_min: int | None = None) -> tuple[list[Tick], list[int]]:
    """The ticks of a lineage's groups of events, and per group the index of the tick that completes
    its last transfer (-1 for a group without events: nothing to wait for). `whole`: no transfer that
    fits a tick spans two (Emitter(whole=True)), as the stored round packs its ticks — unless that would
    make `chain_min` ticks or more of what the default cut keeps under it (the writer would then append
    an atomic batch where it appended a short chain: its append stays what it was)."""
    lh = lineage_hash(lineage)
    emitter = Emitter(lh, next_transfer_id=projector.last_transfer.get(lh, 0) + 1, whole=whole)
    if projector.boots.get(lh) != boot_id:
        emitter.submit(TransferKind.CONTROL, boot_control_body(boot_id))
    last = []
    for events in groups:
        tid = 0
        for event in events:
            tid = emitter.submit_payload(*transfer_of(event), event=event)
        last.append(tid)
    if whole and chain_min is not None and emitter.ticks_needed(False) < chain_min <= emitter.ticks_needed(True):
        emitter.whole = False
    ticks = emitter.drain()
    if len(ticks) == 1:   # (the common case: every group completes in the one tick)
        return ticks, [-1 if tid == 0 else 0 for tid in last]
    at = {tid: i for i, t in enumerate(ticks) for tid in t.completes}
    return ticks, [-1 if tid == 0 else at[tid] for tid in last]
