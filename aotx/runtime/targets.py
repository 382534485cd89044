"""What an applied journal message concerns: the operations and conversations whose streams it changes.

`targets_of(applied)` answers a `Targets`:

| applied transfer | concerns |
|---|---|
| admission of an input | its operation and its conversation (a new input in the conversation's events) |
| output, completion of an input | its operation, with the event itself as a delta (the new bytes; the end) |
| lease of an input | nothing a stream shows (its execution becomes `running`, seen at the end) |
| cancellation of an input | the target operation and its conversation |
| member rights set in a space | the space: every conversation of it and every input in them (rights changed), found by the deliverer (aotx.runtime.space_readers) |
| retirement (retry floor) | the lineage's operations below the floor |
| runtime boot control record | everyone |
| anything else (registration, space, conversation, memory, publication) | nothing a stream shows |

A conversation stream shows each input once, at its admission; an operation stream its result bytes
and its end. `ChangeFeed`, an observer of applied messages, hands each message's targets to its
sinks (the runtime's broker; the RPC server's announcer) — and does nothing at all while no sink
listens (a broker without subscriptions and no announcer: a reader that subscribes later reads after
subscribing, so it misses nothing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ..journal import TransferKind
from ..state import InputAdmitted, InputCancelled, MemberRightsSet, ReceiptsRetired, State, from_body
from ..state.member_wire import MEMBER_WIRE
from ..state.execution import InputCompleted, OutputAppended, execution_from_body
from .observers import Applied
from .space_readers import ConKey, OpKey, SpaceKey, Where, expand, where

log = logging.getLogger("aotx.runtime.targets")
_RIGHTS_SET, _CANCELLED = MemberRightsSet.KIND, InputCancelled.KIND
_MUTATION, _OUTPUT, _COMPLETION, _ADMISSION, _RETIREMENT, _CONTROL = (int(k) for k in (
    TransferKind.MUTATION, TransferKind.OUTPUT, TransferKind.COMPLETION, TransferKind.ADMISSION, TransferKind.RETIREMENT,
    TransferKind.CONTROL))


@dataclass
class Targets:
    """`ops`: operations whose readers read again; `deltas`: the execution events (output, completion)
    of operations whose readers may take them as they are; `conversations`: conversations whose
    readers read again; `floors`: lineage → retry floor (its operations below it retired);
    `spaces`: spaces whose member rights changed (the readers of everything in them read again; who
    they are is asked of `where`, the state's answer to "which space holds this operation or
    conversation", or, where it is None, every reader reads again); `everyone`: every reader reads again."""

    ops: set[OpKey] = field(default_factory=set)
    deltas: dict[OpKey, list] = field(default_factory=dict)
    conversations: set[ConKey] = field(default_factory=set)
    floors: dict[bytes, int] = field(default_factory=dict)
    spaces: set[SpaceKey] = field(default_factory=set)
    everyone: bool = False
    where: Where | None = field(default=None, repr=False, compare=False)

    def __bool__(self) -> bool:
        return bool(self.everyone or self.ops or self.deltas or self.conversations or self.floors or self.spaces)

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
        if other.spaces:
            self.spaces |= other.spaces
            self.where = self.where or other.where
        for lineage, floor in other.floors.items():
            self.floors[lineage] = max(floor, self.floors.get(lineage, 0))

    def keys(self) -> "Targets":
        """The same targets without delta events (what travels between processes)."""
        out = Targets()
        out.merge(self, deltas=False)
        return out


def targets_of(applied: Applied) -> Targets:
    """What `applied` concerns (no table is looked at: spaces are resolved by whoever delivers them)."""
    out = Targets()
    collect(applied, out, True)
    return out


def collect(applied: Applied, out: Targets, deltas: bool, within: Where | None = None) -> bool:
    """Add what `applied` concerns to `out`: with `deltas`, an output or a completion joins `out.deltas` as its
    event (targets_of); without, its operation joins `out.ops` — what `out.merge(targets_of(applied), deltas=False)`
    adds, without a Targets a message (a sink that only gathers keys: the announcer). A space added sets
    `out.where` to `within` where it has none. True where anything was added."""
    added = False
    for t in applied.transfers:
        kind = t.kind
        if kind == _MUTATION:   # the commonest first (kinds compared as ints: an IntEnum member's lookup is ~1k)
            wire = t.__dict__.get("wire")   # a member change the feed applied from its Struct: its event unbuilt
            if wire is not None and wire.__class__ is MEMBER_WIRE:
                out.spaces.add(wire.space_lineage + wire.space)
                out.where = out.where or within
                added = True
                continue
            ev = t.event   # decoded already (its own tick, or the feed's fast path): the body stays unread
            if ev is None:
                if t.body.get("kind") not in (_RIGHTS_SET, _CANCELLED):   # checked by the projector just now
                    continue
                ev = from_body(t.body)
            if isinstance(ev, MemberRightsSet):
                out.spaces.add(ev.space_lineage + ev.space)
                out.where = out.where or within
            elif isinstance(ev, InputCancelled):
                out.ops.add((ev.op.lineage, ev.target_sequence))
                out.conversations.add(ev.conversation_lineage + ev.conversation)
            else:
                continue
        elif kind == _OUTPUT:   # the projector has just checked this body
            body = t.body
            ev = OutputAppended(body["actor"], body["sequence"], body["offset"], body["data"])
            if deltas:
                out.deltas.setdefault((ev.lineage, ev.sequence), []).append(ev)
            else:
                out.ops.add((ev.lineage, ev.sequence))
        elif kind == _COMPLETION:
            ev = execution_from_body(kind, t.body)
            assert isinstance(ev, InputCompleted)
            if deltas:
                out.deltas.setdefault((ev.lineage, ev.sequence), []).append(ev)
            else:
                out.ops.add((ev.lineage, ev.sequence))
        elif kind == _ADMISSION:
            ev = _event(t)
            assert isinstance(ev, InputAdmitted)
            out.ops.add((ev.op.lineage, ev.op.sequence))
            out.conversations.add(ev.conversation_lineage + ev.conversation)
        elif kind == _RETIREMENT:
            ev = _event(t)
            assert isinstance(ev, ReceiptsRetired)
            lineage = ev.op.lineage
            out.floors[lineage] = max(ev.retry_floor, out.floors.get(lineage, 0))
        elif kind == _CONTROL:
            out.everyone = True
        else:
            continue
        added = True
    return added


def _event(t):
    """A state transfer's event: the one the writer encoded where it is its own tick (Transfer.event),
    else decoded from the body."""
    return t.event if t.event is not None else from_body(t.body)


Sink = Callable[[Targets], None]


class Coalescing(Protocol):
    """A sink that gathers what changed until it tells its readers (the split deployment's announcer):
    `pending()`, the Targets to add to (keys only: an execution event's operation joins `ops`); `due()`, after
    something was added."""

    def pending(self) -> Targets: ...

    def due(self) -> None: ...


class ChangeFeed:
    """An observer of applied messages: each message's targets go to every sink (in the order added);
    `everyone()` tells every sink that every reader must read again (rights changed outside the log:
    a grant file reloaded). A sink added with `listening` (a test of whether it has readers now) is
    skipped while that says no; with no sink listening a message costs nothing more. A coalescing sink
    (`add_coalescing`) has each message's targets added to what it gathers (`collect`), with no Targets made
    for the message where no other sink listens."""

    def __init__(self, state: Callable[[], State]) -> None:
        self._state = state
        self._where = where(state)
        self.sinks: list[Sink] = []
        self.coalescing: list[Coalescing] = []
        self._listening: dict[Sink, Callable[[], bool]] = {}

    def add(self, sink: Sink, *, listening: Callable[[], bool] | None = None) -> Sink:
        self.sinks.append(sink)
        if listening is not None:
            self._listening[sink] = listening
        return sink

    def add_coalescing(self, sink: Coalescing) -> Coalescing:
        self.coalescing.append(sink)
        return sink

    def remove_coalescing(self, sink: Coalescing) -> None:
        if sink in self.coalescing:
            self.coalescing.remove(sink)

    def __call__(self, applied: Applied) -> None:
        for gather in self.coalescing:
            try:
                if collect(applied, gather.pending(), False, self._where):
                    gather.due()
            except Exception:  # one sink's bug must not keep the others uninformed
                log.exception("change sink %r failed", gather)
        for sink in self.sinks:
            test = self._listening.get(sink)
            if test is None or test():
                break
        else:
            return
        targets = targets_of(applied)
        if targets.spaces:
            targets.where = self._where
        self._tell(targets, coalescing=False)

    def everyone(self) -> None:
        self._tell(Targets(everyone=True))

    def concrete(self, targets: Targets) -> Targets:
        """`targets` with its spaces named as what is in them now (every conversation of each, every
        input in them) — for a sink that tells readers it cannot ask (the split deployment's announcer)."""
        if not targets.spaces or targets.everyone:
            return targets
        cons, ops, unknown = expand(self._state(), targets.spaces)
        out = Targets(ops=targets.ops | ops, deltas=targets.deltas, conversations=targets.conversations | cons,
                      floors=targets.floors, everyone=targets.everyone or unknown)
        return out

    def _tell(self, targets: Targets, coalescing: bool = True) -> None:
        if not targets:
            return
        for sink in list(self.sinks):
            try:
                sink(targets)
            except Exception:  # one sink's bug must not keep the others uninformed
                log.exception("change sink %r failed", sink)
        for gather in list(self.coalescing) if coalescing else ():
            try:
                gather.pending().merge(targets, deltas=False)
                gather.due()
            except Exception:  # one sink's bug must not keep the others uninformed
                log.exception("change sink %r failed", gather)
