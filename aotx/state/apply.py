"""apply(state, event) -> state. Pure; checks the event before changing anything.

The version of a lineage is its next sequence: an event must carry exactly that sequence
(1 for a registration of an unknown lineage) and the operation ID derived from it. Any
mismatch — wrong order, missing row, a command over the bytes bound — raises and leaves the
state as it was (fail closed), so a replay never guesses.

A table's capacity is decide's bound, not apply's: an event that needs a row of a table the log
has already filled (two runtimes that each took the last free row, or a log written under larger
capacities) applies, and the table grows by that row (aotx.state.growth), on every replay alike.

`apply_into(state, event)` is the same rule applied in place to a State its caller owns (the
runtime's projector): every check runs before the first write, so a refused event leaves that
State untouched too. `apply` is a copy of the state followed by `apply_into`.
"""

from __future__ import annotations

import heapq
import struct
from dataclasses import replace
from typing import Callable

import numpy as np

from .derive import operation_id
from .errors import ApplyError, CapacityFull
from .events import (ConversationCreated, Event, InputAdmitted, InputCancelled, MemberRightsSet,
                     MemoryPublicationRecorded, ParticipantRegistered, ReceiptsRetired, SpaceCreated)
from .execution import ExecutionRecord, input_slot
from .growth import add_receipt_slot, ensure_row
from .ids import IdKind, format_id
from .state import Index, Save, State
from .tables import (CONVERSATION, CONVERSATION_ROW as _CONVERSATION_ROW, MEMBER, MEMBER_ROW as _MEMBER_ROW,
                     PARTICIPANT, PARTICIPANT_ROW as _PARTICIPANT_ROW, RECEIPT, RECEIPT_ROW, SPACE, SPACE_ROW as _SPACE_ROW)
from .vocab import Admission, Commit, MutationKind, ResourceKind, Terminal, Transport

_KIND = {ParticipantRegistered: MutationKind.REGISTER, ReceiptsRetired: MutationKind.RETIRE,
         SpaceCreated: MutationKind.CREATE_SPACE, MemberRightsSet: MutationKind.SET_MEMBER,
         ConversationCreated: MutationKind.CREATE_CONVERSATION, InputAdmitted: MutationKind.INPUT,
         InputCancelled: MutationKind.CANCEL, MemoryPublicationRecorded: MutationKind.PUBLISH}
_TABLES = ("participants", "spaces", "conversations", "members", "receipts")
_ZERO16 = bytes(16)
# the receipt row's constant codes, as plain ints (packed per event)
_ACCEPTED, _COMMITTED, _SAVED_ADMISSION = int(Transport.ACCEPTED), int(Commit.COMMITTED), int(Admission.SAVED)
_PENDING, _SAVED_TERMINAL = int(Terminal.PENDING), int(Terminal.SAVED)
_KIND_CODE = {cls: int(kind) for cls, kind in _KIND.items()}
_MEMBER_CODE, _MEMBER_RESOURCE = _KIND_CODE[MemberRightsSet], int(ResourceKind.MEMBER)
_RECEIPT_SIZE = RECEIPT.itemsize   # a row written in place (pack_into the table's buffer: C-contiguous rows)
_zero_row = struct.Struct(f"{_RECEIPT_SIZE}x").pack_into   # pad bytes pack as zeros: a freed row's bytes
# single fields read straight from a table's buffer (rows are C-contiguous): one unpack instead of a
# structured array's field view, its indexing and the scalar's conversion (~2× the cost)
_PSIZE, _SSIZE, _CSIZE = PARTICIPANT.itemsize, SPACE.itemsize, CONVERSATION.itemsize
_NEXT_AT, _FLOOR_AT = PARTICIPANT.fields["next_sequence"][1], PARTICIPANT.fields["retry_floor"][1]
_IDENT_AT, _OWNER_AT = PARTICIPANT.fields["ident"][1], SPACE.fields["owner"][1]
_u64_at, _u32_at, _b16_at = struct.Struct("<Q").unpack_from, struct.Struct("<I").unpack_from, struct.Struct("16s").unpack_from
_u64_into = struct.Struct("<Q").pack_into
_U64_MAX = (1 << 64) - 1
_MSIZE = MEMBER.itemsize
_RECEIPT_ROW = RECEIPT_ROW   # used, lineage, sequence, operation, operation_key, kind, http_status, transport,
#                              commit, admission, terminal, resource_kind, resource_lineage, resource_ident,
#                              command_len, result_len (aotx.state.tables)


def _fields_reader(dtype, *named: tuple[str, str]):
    """unpack_from of only the named fields of a `dtype` row ((name, struct code), in offset order): the
    bytes between them skipped, the format made from the dtype's offsets."""
    fmt, at = "<", 0
    for name, code in named:
        offset = dtype.fields[name][1]
        fmt += f"{offset - at}x{code}" if offset > at else code
        at = offset + struct.calcsize("<" + code)
    return struct.Struct(fmt).unpack_from


# a receipt row's sequence, operation key and terminal code (a retirement's scan: no other field unpacked)
_SEQ_KEY_TERMINAL = _fields_reader(RECEIPT, ("sequence", "Q"), ("operation_key", "16s"), ("terminal", "B"))


def apply(state: State, event: Event) -> State:
    """The state after `event`; `state` itself is not changed."""
    new = owned_copy(state)
    apply_into(new, event)
    return freeze(new)


def owned_copy(state: State) -> State:
    """A private, writable copy of a state (tables, per-slot lists and index) for `apply_into`."""
    new = replace(state, **{t: getattr(state, t).copy() for t in _TABLES},
                  commands=list(state.commands), saves=list(state.saves), executions=list(state.executions),
                  input_counts=list(state.input_counts))
    object.__setattr__(new, "_index", state.index.copy())
    return new


def freeze(state: State) -> State:
    """Make an owned state immutable again (read-only tables, tuples) — same object, same index."""
    for t in _TABLES:
        getattr(state, t).flags.writeable = False
    object.__setattr__(state, "commands", tuple(state.commands))
    object.__setattr__(state, "saves", tuple(state.saves))
    object.__setattr__(state, "executions", tuple(state.executions))
    object.__setattr__(state, "input_counts", tuple(state.input_counts))
    return state


def record_save_into(state: State, slot: int, save: Save) -> None:
    """`receipts.record_save` on an owned state (its `saves` is a list)."""
    state.saves[slot] = save  # type: ignore[index]


def apply_into(state: State, event: Event) -> int:
    """Apply `event` to an owned state (from `owned_copy`, or the projector's), in place; returns the
    receipt slot it wrote. Raises (ApplyError, CapacityFull) before any write when the event does not apply."""
    op = event.op
    lineage, sequence = op.lineage, op.sequence
    ix = state.index
    prow = ix.participants.get(lineage)
    parts = state.participants
    nxt = 1 if prow is None else _u64_at(parts, prow * _PSIZE + _NEXT_AT)[0]
    registers = isinstance(event, ParticipantRegistered)
    if registers != (prow is None):
        raise ApplyError(f"{_Where(event)}: lineage is {'not ' if prow is None else 'already '}registered")
    if sequence != nxt:
        raise ApplyError(f"{_Where(event)}: expected sequence {nxt}")
    if op.operation != operation_id(lineage, sequence, op.operation_key):
        raise ApplyError(f"{_Where(event)}: operation ID is not the one derived from lineage, sequence and key")
    if len(op.command) > state.capacities.command_bytes:
        raise CapacityFull("command bytes", state.capacities.command_bytes)
    if isinstance(event, MemberRightsSet):   # the commonest, checked and written inline (no closure)
        slot = _member_into(state, ix, prow, lineage, sequence, op.operation, op.operation_key, op.command,  # type: ignore[arg-type]
                            event.space_lineage, event.space, event.participant_lineage, event.participant,
                            int(event.rights))   # (registered: prow is not None here)
        if slot is None:
            _member_fault(state, event, _Where(event))   # raises: the check that failed, named
        return slot
    where = _Where(event)   # formatted only into an error's message

    # ---- checks: each returns the write to do once every check has passed ----
    freed: list[int] = []
    if registers:
        write, resource = _register(state, event, where), (ResourceKind.PARTICIPANT, op.lineage, event.participant)
    elif isinstance(event, ReceiptsRetired):
        assert prow is not None
        write, freed = _retire(state, event, prow, where)
        resource = (ResourceKind.NONE, _ZERO16, _ZERO16)
    elif isinstance(event, SpaceCreated):
        assert prow is not None
        write, resource = _create_space(state, event, prow, where), (ResourceKind.SPACE, op.lineage, event.space)
    elif isinstance(event, ConversationCreated):
        assert prow is not None
        write = _create_conversation(state, event, prow, where)
        resource = (ResourceKind.CONVERSATION, op.lineage, event.conversation)
    elif isinstance(event, InputAdmitted):
        con_row = _conversation(state, event.conversation_lineage, event.conversation, where)
        write = _noop
        resource = (ResourceKind.CONVERSATION, event.conversation_lineage, event.conversation)
    elif isinstance(event, InputCancelled):
        _conversation(state, event.conversation_lineage, event.conversation, where)
        write = _cancel(state, event, where)
        resource = (ResourceKind.CONVERSATION, event.conversation_lineage, event.conversation)
    elif isinstance(event, MemoryPublicationRecorded):
        _space(state, event.space_lineage, event.space, where)
        write = _noop
        resource = (ResourceKind.SPACE, event.space_lineage, event.space)
    else:
        raise ApplyError(f"unknown event type {type(event).__name__}")
    free = ix.free

    # ---- writes: nothing below raises ----
    if prow is not None:  # first: the one write that could still fail (u64 overflow) precedes every other
        _next_sequence_into(parts, prow, op.sequence + 1)
    new_prow = write()
    if not free:   # every slot in use (the log holds more receipts than the capacity): one slot more
        add_receipt_slot(state)
    slot = heapq.heappop(free)
    admitted = isinstance(event, InputAdmitted)
    # one packed write of the whole row (field order and widths of tables.RECEIPT, checked at import)
    _RECEIPT_ROW.pack_into(state.receipts, slot * _RECEIPT_SIZE,
        1, op.lineage, op.sequence, op.operation, op.operation_key, _KIND_CODE[type(event)], 202 if admitted else 201,
        # a synchronous mutation is admitted and terminal in the same saved event; an input's
        # terminal result is saved later by its completion transfer
        _ACCEPTED, _COMMITTED, _SAVED_ADMISSION, _PENDING if admitted else _SAVED_TERMINAL,
        resource[0], resource[1], resource[2], len(op.command), 0)
    state.commands[slot] = op.command  # type: ignore[index]
    if admitted:
        order = state.input_counts[con_row] + 1
        state.input_counts[con_row] = order  # type: ignore[index]
        state.executions[slot] = ExecutionRecord(event.model_digest, event.page_limit,  # type: ignore[index]
                                                 order=order)
    else:
        state.executions[slot] = None  # type: ignore[index]
    ix.add_receipt(slot, op.lineage, op.sequence, op.operation_key)
    if prow is None:   # (the table itself: a registration may have grown it)
        state.participants["next_sequence"][new_prow] = op.sequence + 1
    object.__setattr__(state, "applied", state.applied + 1)
    return slot


def _next_sequence_into(parts: np.ndarray, prow: int, value: int) -> None:
    """participants["next_sequence"][prow] = value: one struct write where it fits; numpy's write (which
    raises its OverflowError, as always) where it does not."""
    if value <= _U64_MAX:
        _u64_into(parts, prow * _PSIZE + _NEXT_AT, value)
    else:
        parts["next_sequence"][prow] = value


def apply_member_fields(state: State, lineage: bytes, sequence: int, operation: bytes, operation_key: bytes,
                        command: bytes, space_lineage: bytes, space: bytes, participant_lineage: bytes,
                        participant: bytes, rights: int) -> int | None:
    """`apply_into` of a member-rights change given by its fields (a MemberRightsSet's, `rights` as its int),
    for a reader that has them without the event (aotx.state.member_wire): the same checks and writes;
    returns the receipt slot written, or None — nothing written — where the event does not apply (its
    error is `apply_into`'s of the event: build it and apply that to name the fault)."""
    ix = state._index or state.index   # (an owned state's index is built: the property's call saved)
    prow = ix.participants.get(lineage)
    if prow is None or sequence != _u64_at(state.participants, prow * _PSIZE + _NEXT_AT)[0] \
            or operation != operation_id(lineage, sequence, operation_key) \
            or len(command) > state.capacities.command_bytes:
        return None
    return _member_into(state, ix, prow, lineage, sequence, operation, operation_key, command, space_lineage, space,
                        participant_lineage, participant, rights)


def _member_into(state: State, ix: Index, prow: int, lineage: bytes, sequence: int, operation: bytes,
                 operation_key: bytes, command: bytes, space_lineage: bytes, space_ident: bytes,
                 participant_lineage: bytes, participant: bytes, rights: int) -> int | None:
    """apply_into's rest for a member-rights change (its commonest event), once the operation's checks have
    passed: its checks, then apply_into's writes in the same order, inline (no closure). None,
    nothing written, where a check fails (`_member_fault` names why)."""
    space = ix.spaces.get(space_lineage + space_ident)   # (the event's fields are bytes: the index's keys)
    if space is None:
        return None
    target = ix.participants.get(participant_lineage)
    if target is None or _b16_at(state.participants, target * _PSIZE + _IDENT_AT)[0] != participant \
            or _u32_at(state.spaces, space * _SSIZE + _OWNER_AT)[0] == target:
        return None
    free = ix.free

    # ---- writes: nothing below raises ----
    _u64_into(state.participants, prow * _PSIZE + _NEXT_AT, sequence + 1) if sequence < _U64_MAX else \
        _next_sequence_into(state.participants, prow, sequence + 1)   # first: the one write that could fail
    row = ix.members.get((space, target))
    if row is None:
        row = state.n_members
        ensure_row(state, "members", row)
        ix.members.setdefault((space, target), row)
        object.__setattr__(state, "n_members", row + 1)
    _MEMBER_ROW.pack_into(state.members, row * _MSIZE, space, target, rights)   # (tables.MEMBER, in order)
    if not free:   # every slot in use (the log holds more receipts than the capacity): one slot more
        add_receipt_slot(state)
    slot = heapq.heappop(free)
    _RECEIPT_ROW.pack_into(state.receipts, slot * _RECEIPT_SIZE,
        1, lineage, sequence, operation, operation_key, _MEMBER_CODE, 201,
        _ACCEPTED, _COMMITTED, _SAVED_ADMISSION, _SAVED_TERMINAL,
        _MEMBER_RESOURCE, participant_lineage, participant, len(command), 0)
    state.commands[slot] = command  # type: ignore[index]
    state.executions[slot] = None  # type: ignore[index]
    ix.add_receipt(slot, lineage, sequence, operation_key)
    object.__setattr__(state, "applied", state.applied + 1)
    return slot


class _Where:
    """Where an event is, for an error's message: formatted only when one is raised."""

    __slots__ = ("event",)

    def __init__(self, event: Event) -> None:
        self.event = event

    def __str__(self) -> str:
        op = self.event.op
        return f"{self.event.KIND} lineage {op.lineage.hex()} sequence {op.sequence}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _register(state: State, e: ParticipantRegistered, where: str) -> Callable[[], int]:
    _sixteen(e.op.lineage, where, "lineage")
    _sixteen(e.participant, where, "participant")
    i = state.n_participants

    def write() -> int:
        ensure_row(state, "participants", i)
        _PARTICIPANT_ROW.pack_into(state.participants, i * _PSIZE, e.op.lineage, e.participant, 1, 1)   # (the row)
        state.index.participants.setdefault(e.op.lineage, i)
        object.__setattr__(state, "n_participants", i + 1)
        return i
    return write


def _retire(state: State, e: ReceiptsRetired, prow: int, where: str) -> tuple[Callable[[], None], list[int]]:
    floor = _u64_at(state.participants, prow * _PSIZE + _FLOOR_AT)[0]
    if not floor <= e.retry_floor <= e.op.sequence:
        raise ApplyError(f"{where}: retry floor {e.retry_floor} outside {floor}..{e.op.sequence}")
    receipts, below = state.receipts, e.retry_floor
    freed: list[int] = []
    seqs: list[int] = []
    keys: list[bytes] = []
    saved = _SAVED_TERMINAL
    for slot in sorted(state.index.by_lineage.get(e.op.lineage, ())):   # ascending; one unpack of each row
        seq, key, terminal = _SEQ_KEY_TERMINAL(receipts, slot * _RECEIPT_SIZE)
        if seq < below:
            if terminal != saved:
                raise ApplyError(f"{where}: receipt of sequence {seq} is not terminal")
            freed.append(slot)
            seqs.append(seq)
            keys.append(key)

    def write() -> None:
        state.index.drop_receipts(e.op.lineage, freed, seqs, keys)   # (the lineage looked up once)
        table, commands, saves, executions = state.receipts, state.commands, state.saves, state.executions
        for slot in freed:
            commands[slot] = b""  # type: ignore[index]
            saves[slot] = None  # type: ignore[index]
            executions[slot] = None  # type: ignore[index]
            _zero_row(table, slot * _RECEIPT_SIZE)   # the row's bytes zeroed (= receipts[slot] = 0)
        # the floor is part of the state before any freed slot can be reused
        _u64_into(state.participants, prow * _PSIZE + _FLOOR_AT, e.retry_floor)   # (≤ its sequence: fits u64)
    return write, freed


def _space(state: State, lineage: bytes, ident: bytes, where: str) -> int:
    row = state.space_row(lineage, ident)
    if row is None:
        raise ApplyError(f"{where}: space {format_id(IdKind.SPACE, lineage, ident)} does not exist")
    return row


def _create_space(state: State, e: SpaceCreated, prow: int, where: str) -> Callable[[], None]:
    if state.space_row(e.op.lineage, e.space) is not None:
        raise ApplyError(f"{where}: space {format_id(IdKind.SPACE, e.op.lineage, e.space)} already exists")
    _sixteen(e.space, where, "space")
    i, scope = state.n_spaces, int(e.scope)
    if not 0 <= scope <= 0xFF:
        raise ApplyError(f"{where}: scope {scope} does not fit the table")

    def write() -> None:
        ensure_row(state, "spaces", i)
        _SPACE_ROW.pack_into(state.spaces, i * _SSIZE, e.op.lineage, e.space, prow, scope)   # (the whole row)
        state.index.spaces.setdefault(e.op.lineage + e.space, i)
        object.__setattr__(state, "n_spaces", i + 1)
    return write


def _member_fault(state: State, e: MemberRightsSet, where: _Where) -> None:
    """Raise the error of the member-rights change `_member_into` refused: the first of its checks that fails."""
    ix = state.index   # (the event's fields are bytes: the index's keys, looked up directly)
    space = ix.spaces.get(e.space_lineage + e.space)
    if space is None:
        _space(state, e.space_lineage, e.space, where)   # raises: the space does not exist
    target = ix.participants.get(e.participant_lineage)
    if target is None or _b16_at(state.participants, target * _PSIZE + _IDENT_AT)[0] != e.participant:
        raise ApplyError(f"{where}: participant {format_id(IdKind.PARTICIPANT, e.participant_lineage, e.participant)}"
                         " does not exist")
    if _u32_at(state.spaces, space * _SSIZE + _OWNER_AT)[0] == target:
        raise ApplyError(f"{where}: the owner's rights cannot change")
    raise ApplyError(f"{where}: refused")   # (not reached: these are _member_into's checks)


def _create_conversation(state: State, e: ConversationCreated, prow: int, where: str) -> Callable[[], None]:
    space = _space(state, e.space_lineage, e.space, where)
    if state.conversation_row(e.op.lineage, e.conversation) is not None:
        raise ApplyError(f"{where}: conversation already exists")
    _sixteen(e.conversation, where, "conversation")
    i = state.n_conversations

    def write() -> None:
        ensure_row(state, "conversations", i)
        _CONVERSATION_ROW.pack_into(state.conversations, i * _CSIZE, e.op.lineage, e.conversation, space, prow)
        state.index.conversations.setdefault(e.op.lineage + e.conversation, i)
        object.__setattr__(state, "n_conversations", i + 1)
    return write


def _sixteen(ident: bytes, where: str, what: str) -> None:
    """An id packed into a row is 16 bytes (checked before any write: a numpy row write raised at the write)."""
    if len(ident) != 16:
        raise ApplyError(f"{where}: {what} id of {len(ident)} bytes")


def _noop() -> None:
    return None


def _conversation(state: State, lineage: bytes, ident: bytes, where: str) -> int:
    row = state.conversation_row(lineage, ident)
    if row is None:
        raise ApplyError(f"{where}: conversation {format_id(IdKind.CONVERSATION, lineage, ident)} does not exist")
    return row


def _cancel(state: State, e: InputCancelled, where: str) -> Callable[[], None]:
    target = input_slot(state, e.op.lineage, e.target_sequence, where)
    record = state.executions[target]
    row = state.receipts[target]
    if (row["resource_lineage"].tobytes(), row["resource_ident"].tobytes()) != (e.conversation_lineage,
                                                                                e.conversation):
        raise ApplyError(f"{where}: input {e.target_sequence} is not in this conversation")
    if record.status.terminal:
        raise ApplyError(f"{where}: input {e.target_sequence} is already {record.status.label}")

    def write() -> None:
        state.executions[target] = replace(record, cancel_requested=True)  # type: ignore[index]
    return write
