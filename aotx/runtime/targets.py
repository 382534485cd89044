"""What an applied journal message concerns: the operations and conversations whose streams it changes.

`targets_of(applied, state)` (the state after the message was applied) answers a `Targets`:

| applied transfer | concerns |
|---|---|
| admission of an input | its operation and its conversation (a new input in the conversation's events) |
| output, completion of an input | its operation, with the event itself as a delta (the new bytes; the end) |
| lease of an input | nothing a stream shows (its execution becomes `running`, seen at the end) |
| cancellation of an input | the target operation and its conversation |
| member rights set in a space | every conversation of that space and every input in them (rights changed) |
| retirement (retry floor) | the lineage's operations below the floor |
| runtime boot control record | everyone |
| anything else (registration, space, conversation, memory, publication) | nothing a stream shows |

A conversation stream shows each input once, at its admission; an operation stream its result bytes
and its end. `ChangeFeed`, an observer of applied messages, hands each message's targets to its
sinks (the runtime's broker; the RPC server's announcer).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..journal import TransferKind
from ..state import InputAdmitted, InputCancelled, MemberRightsSet, ReceiptsRetired, State, from_body
from ..state.execution import InputCompleted, OutputAppended, execution_from_body
from ..state.tables import raw
from .observers import Applied

log = logging.getLogger("aotx.runtime.targets")
OpKey = tuple[bytes, int]          # (lineage, sequence) of an operation
ConKey = bytes                     # lineage ‖ ident of a conversation (32 bytes)


@dataclass
class Targets:
    """`ops`: operations whose readers read again; `deltas`: the execution events (output, completion)
    of operations whose readers may take them as they are; `conversations`: conversations whose
    readers read again; `floors`: lineage → retry floor (its operations below it retired);
    `everyone`: every reader reads again."""

    ops: set[OpKey] = field(default_factory=set)
    deltas: dict[OpKey, list] = field(default_factory=dict)
    conversations: set[ConKey] = field(default_factory=set)
    floors: dict[bytes, int] = field(default_factory=dict)
    everyone: bool = False

    def __bool__(self) -> bool:
        return bool(self.everyone or self.ops or self.deltas or self.conversations or self.floors)

    def merge(self, other: "Targets", *, deltas: bool = True) -> None:
        """Add `other`'s targets; with deltas=False its delta operations join `ops` (read again)."""
        self.everyone |= other.everyone
        self.ops |= other.ops
        if deltas:
            for key, events in other.deltas.items():
                self.deltas.setdefault(key, []).extend(events)
        else:
            self.ops |= other.deltas.keys()
        self.conversations |= other.conversations
        for lineage, floor in other.floors.items():
            self.floors[lineage] = max(floor, self.floors.get(lineage, 0))

    def keys(self) -> "Targets":
        """The same targets without delta events (what travels between processes)."""
        out = Targets()
        out.merge(self, deltas=False)
        return out


def targets_of(applied: Applied, state: State) -> Targets:
    out = Targets()
    for t in applied.transfers:
        kind = t.kind
        if kind == TransferKind.OUTPUT:   # the hot path: the projector has just checked this body
            body = t.body
            ev = OutputAppended(body["actor"], body["sequence"], body["offset"], body["data"])
            out.deltas.setdefault((ev.lineage, ev.sequence), []).append(ev)
        elif kind == TransferKind.COMPLETION:
            ev = execution_from_body(kind, t.body)
            assert isinstance(ev, InputCompleted)
            out.deltas.setdefault((ev.lineage, ev.sequence), []).append(ev)
        elif kind == TransferKind.ADMISSION:
            ev = _event(t)
            assert isinstance(ev, InputAdmitted)
            out.ops.add((ev.op.lineage, ev.op.sequence))
            out.conversations.add(ev.conversation_lineage + ev.conversation)
        elif kind == TransferKind.MUTATION:
            ev = _event(t)
            if isinstance(ev, InputCancelled):
                out.ops.add((ev.op.lineage, ev.target_sequence))
                out.conversations.add(ev.conversation_lineage + ev.conversation)
            elif isinstance(ev, MemberRightsSet):
                _space_readers(state, ev.space_lineage, ev.space, out)
        elif kind == TransferKind.RETIREMENT:
            ev = _event(t)
            assert isinstance(ev, ReceiptsRetired)
            lineage = ev.op.lineage
            out.floors[lineage] = max(ev.retry_floor, out.floors.get(lineage, 0))
        elif kind == TransferKind.CONTROL:
            out.everyone = True
    return out


def _event(t):
    """A state transfer's event: the one the writer encoded where it is its own tick (Transfer.event),
    else decoded from the body."""
    return t.event if t.event is not None else from_body(t.body)


def _space_readers(state: State, lineage: bytes, ident: bytes, out: Targets) -> None:
    """Every conversation of the space, and every input in them."""
    row = state.space_row(lineage, ident)
    if row is None:  # the event was applied, so the space exists; be safe anyway
        out.everyone = True
        return
    if not state.n_conversations:   # no conversation anywhere: none in this space (no numpy scan)
        return
    convs = state.conversations[:state.n_conversations]
    cons = {raw(c["lineage"]) + raw(c["ident"]) for c in convs[np.nonzero(convs["space"] == row)[0]]}
    out.conversations |= cons
    if not cons:
        return
    receipts = state.receipts
    for slot, record in enumerate(state.executions):
        if record is not None:
            r = receipts[slot]
            if raw(r["resource_lineage"]) + raw(r["resource_ident"]) in cons:
                out.ops.add((raw(r["lineage"]), int(r["sequence"])))


Sink = Callable[[Targets], None]


class ChangeFeed:
    """An observer of applied messages: each message's targets go to every sink (in the order added);
    `everyone()` tells every sink that every reader must read again (rights changed outside the log:
    a grant file reloaded)."""

    def __init__(self, state: Callable[[], State]) -> None:
        self._state = state
        self.sinks: list[Sink] = []

    def __call__(self, applied: Applied) -> None:
        if self.sinks:
            self._tell(targets_of(applied, self._state()))

    def everyone(self) -> None:
        self._tell(Targets(everyone=True))

    def _tell(self, targets: Targets) -> None:
        if not targets:
            return
        for sink in list(self.sinks):
            try:
                sink(targets)
            except Exception:  # one sink's bug must not keep the others uninformed
                log.exception("change sink %r failed", sink)
