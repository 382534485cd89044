"""apply(state, event) -> state. Pure; checks the event's version before changing anything.

The version of a lineage is its next sequence: an event must carry exactly that sequence
(1 for a registration of an unknown lineage) and the operation ID derived from it. Any
mismatch — wrong order, missing row, full table under smaller capacities — raises and leaves
the state as it was (fail closed), so a replay never guesses.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .derive import operation_id
from .errors import ApplyError, CapacityFull
from .events import (ConversationCreated, Event, MemberRightsSet, ParticipantRegistered, ReceiptsRetired,
                     SpaceCreated)
from .ids import IdKind, format_id
from .state import State
from .tables import append_row, b16, free_receipt_slot, frozen, raw
from .vocab import Admission, Commit, MutationKind, ResourceKind, Terminal, Transport

_KIND = {ParticipantRegistered: MutationKind.REGISTER, ReceiptsRetired: MutationKind.RETIRE,
         SpaceCreated: MutationKind.CREATE_SPACE, MemberRightsSet: MutationKind.SET_MEMBER,
         ConversationCreated: MutationKind.CREATE_CONVERSATION}


def apply(state: State, event: Event) -> State:
    op = event.op
    prow = state.participant_row(op.lineage)
    nxt = 1 if prow is None else int(state.participants[prow]["next_sequence"])
    where = f"{event.KIND} lineage {op.lineage.hex()} sequence {op.sequence}"
    if isinstance(event, ParticipantRegistered) != (prow is None):
        raise ApplyError(f"{where}: lineage is {'not ' if prow is None else 'already '}registered")
    if op.sequence != nxt:
        raise ApplyError(f"{where}: expected sequence {nxt}")
    if op.operation != operation_id(op.lineage, op.sequence, op.operation_key):
        raise ApplyError(f"{where}: operation ID is not the one derived from lineage, sequence and key")
    if len(op.command) > state.capacities.command_bytes:
        raise CapacityFull("command bytes", state.capacities.command_bytes)
    if isinstance(event, ParticipantRegistered):
        state, prow = _register(state, event)
        resource = (ResourceKind.PARTICIPANT, op.lineage, event.participant)
    elif isinstance(event, ReceiptsRetired):
        state = _retire(state, event, prow, where)
        resource = (ResourceKind.NONE, bytes(16), bytes(16))
    elif isinstance(event, SpaceCreated):
        state = _create_space(state, event, prow, where)
        resource = (ResourceKind.SPACE, op.lineage, event.space)
    elif isinstance(event, MemberRightsSet):
        state = _set_member(state, event, where)
        resource = (ResourceKind.MEMBER, event.participant_lineage, event.participant)
    elif isinstance(event, ConversationCreated):
        state = _create_conversation(state, event, prow, where)
        resource = (ResourceKind.CONVERSATION, op.lineage, event.conversation)
    else:
        raise ApplyError(f"unknown event type {type(event).__name__}")
    state = _add_receipt(state, event, resource)
    parts = state.participants.copy()
    parts[prow]["next_sequence"] = op.sequence + 1
    return replace(state, participants=frozen(parts), applied=state.applied + 1)


def _register(state: State, e: ParticipantRegistered) -> tuple[State, int]:
    arr, i = append_row("participants", state.participants, state.n_participants)
    arr[i]["lineage"], arr[i]["ident"] = b16(e.op.lineage), b16(e.participant)
    arr[i]["next_sequence"], arr[i]["retry_floor"] = 1, 1
    return replace(state, participants=frozen(arr), n_participants=i + 1), i


def _retire(state: State, e: ReceiptsRetired, prow: int, where: str) -> State:
    floor = int(state.participants[prow]["retry_floor"])
    if not floor <= e.retry_floor <= e.op.sequence:
        raise ApplyError(f"{where}: retry floor {e.retry_floor} outside {floor}..{e.op.sequence}")
    receipts, commands, saves = state.receipts.copy(), list(state.commands), list(state.saves)
    for slot in state.receipts_of(e.op.lineage):
        if int(receipts[slot]["sequence"]) < e.retry_floor:
            if int(receipts[slot]["terminal"]) != Terminal.SAVED:
                raise ApplyError(f"{where}: receipt of sequence {int(receipts[slot]['sequence'])} is not terminal")
            receipts[slot] = np.zeros((), dtype=receipts.dtype)
            commands[slot], saves[slot] = b"", None
    # the floor is part of the state before any freed slot can be reused
    parts = state.participants.copy()
    parts[prow]["retry_floor"] = e.retry_floor
    return replace(state, participants=frozen(parts), receipts=frozen(receipts), commands=tuple(commands),
                   saves=tuple(saves))


def _space(state: State, lineage: bytes, ident: bytes, where: str) -> int:
    row = state.space_row(lineage, ident)
    if row is None:
        raise ApplyError(f"{where}: space {format_id(IdKind.SPACE, lineage, ident)} does not exist")
    return row


def _create_space(state: State, e: SpaceCreated, prow: int, where: str) -> State:
    if state.space_row(e.op.lineage, e.space) is not None:
        raise ApplyError(f"{where}: space {format_id(IdKind.SPACE, e.op.lineage, e.space)} already exists")
    arr, i = append_row("spaces", state.spaces, state.n_spaces)
    arr[i]["lineage"], arr[i]["ident"] = b16(e.op.lineage), b16(e.space)
    arr[i]["owner"], arr[i]["scope"] = prow, int(e.scope)
    return replace(state, spaces=frozen(arr), n_spaces=i + 1)


def _set_member(state: State, e: MemberRightsSet, where: str) -> State:
    space = _space(state, e.space_lineage, e.space, where)
    target = state.participant_row(e.participant_lineage)
    if target is None or raw(state.participants[target]["ident"]) != e.participant:
        raise ApplyError(f"{where}: participant {format_id(IdKind.PARTICIPANT, e.participant_lineage, e.participant)}"
                         " does not exist")
    if int(state.spaces[space]["owner"]) == target:
        raise ApplyError(f"{where}: the owner's rights cannot change")
    row = state.member_row(space, target)
    if row is None:
        arr, row = append_row("members", state.members, state.n_members)
        count = row + 1
    else:
        arr, count = state.members.copy(), state.n_members
    arr[row]["space"], arr[row]["participant"], arr[row]["rights"] = space, target, int(e.rights)
    return replace(state, members=frozen(arr), n_members=count)


def _create_conversation(state: State, e: ConversationCreated, prow: int, where: str) -> State:
    space = _space(state, e.space_lineage, e.space, where)
    if state.conversation_row(e.op.lineage, e.conversation) is not None:
        raise ApplyError(f"{where}: conversation already exists")
    arr, i = append_row("conversations", state.conversations, state.n_conversations)
    arr[i]["lineage"], arr[i]["ident"] = b16(e.op.lineage), b16(e.conversation)
    arr[i]["space"], arr[i]["creator"] = space, prow
    return replace(state, conversations=frozen(arr), n_conversations=i + 1)


def _add_receipt(state: State, e: Event, resource: tuple[ResourceKind, bytes, bytes]) -> State:
    slot = free_receipt_slot(state.receipts)
    arr = state.receipts.copy()
    r = arr[slot]
    r["used"], r["lineage"], r["sequence"] = 1, b16(e.op.lineage), e.op.sequence
    r["operation"], r["operation_key"], r["kind"] = b16(e.op.operation), b16(e.op.operation_key), _KIND[type(e)]
    r["http_status"] = 201
    # a synchronous mutation is admitted and terminal in the same saved event
    r["transport"], r["commit"] = Transport.ACCEPTED, Commit.COMMITTED
    r["admission"], r["terminal"] = Admission.SAVED, Terminal.SAVED
    r["resource_kind"], r["resource_lineage"], r["resource_ident"] = resource[0], b16(resource[1]), b16(resource[2])
    r["command_len"], r["result_len"] = len(e.op.command), 0
    commands = list(state.commands)
    commands[slot] = e.op.command
    return replace(state, receipts=frozen(arr), commands=tuple(commands))
