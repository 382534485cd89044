"""decide(state, command) -> Decision. Pure: no I/O, no clock, no randomness.

Order of checks: lineage, grant for the kind (403), registration, the retry table
(DESIGN §5), then — for a new operation only — command bytes, key reuse, rights,
existence and capacities. A refusal changes nothing and consumes no sequence.
"""

from __future__ import annotations

from .decision import (Accepted, Command, Decision, Refusal, Replayed, conflict, forbidden, gone,
                       not_found, table_full)
from .derive import lineage_for, operation_id
from .events import (ConversationCreated, InputAdmitted, InputCancelled, MemberRightsSet, MemoryPublicationRecorded,
                     OpHeader, ParticipantRegistered, ReceiptsRetired, SpaceCreated)
from .errors import StateError
from .ids import IdKind, ResourceId, format_id
from .mutations import (CancelInput, CreateConversation, CreateSpace, PublishMemory, RegisterParticipant,
                        RetireReceipts, SetMemberRights, SubmitInput, canonical_bytes, legacy_bytes)
from .rights import effective_rights, membership_bits
from .state import State
from .tables import raw
from .vocab import MutationKind, Rights, Terminal

GRANT_NEEDED = {
    MutationKind.REGISTER: ("shared_write", Rights.WRITE),
    MutationKind.RETIRE: ("shared_write", Rights.WRITE),
    MutationKind.CREATE_SPACE: ("shared_write", Rights.WRITE),
    MutationKind.SET_MEMBER: ("shared_manage", Rights.MANAGE),
    MutationKind.CREATE_CONVERSATION: ("shared_write", Rights.WRITE),
    MutationKind.INPUT: ("shared_write", Rights.WRITE),
    MutationKind.CANCEL: ("shared_write", Rights.WRITE),
    MutationKind.PUBLISH: ("shared_manage", Rights.MANAGE),
}


_READ = int(Rights.READ)


def decide(state: State, command: Command) -> Decision:
    m, actor = command.mutation, command.actor
    env = m.envelope
    lineage = lineage_for(actor.principal)
    if env.lineage != lineage:
        return conflict(f"lineage {env.lineage.hex()} is not this participant's lineage {lineage.hex()}; "
                        "read /participant")
    grant, right = GRANT_NEEDED[m.kind]
    if not int(actor.grants.rights()) & int(right):   # (in ints: Flag arithmetic costs ~1 µs an operation)
        return forbidden(f"{m.kind.label} needs the {grant} grant")
    prow = state.participant_row(lineage)
    if prow is None and not isinstance(m, RegisterParticipant):
        return conflict("participant is not registered; POST /participant first")
    nxt, floor = (1, 1) if prow is None else (int(state.participants["next_sequence"][prow]),
                                              int(state.participants["retry_floor"][prow]))
    seq = env.sequence
    if seq > nxt:
        return conflict(f"sequence {seq} is ahead of the next sequence {nxt}; read /participant")
    if seq < floor:
        return gone(f"sequence {seq} is below the retry floor {floor}; its receipt is retired")
    canon = canonical_bytes(m)
    if seq < nxt:
        slot = state.receipt_slot(lineage, seq)
        if slot is None:
            raise StateError(f"no receipt for lineage {lineage.hex()} sequence {seq} between floor and next")
        op = format_id(IdKind.OPERATION, lineage, raw(state.receipts["operation"][slot]))
        if state.commands[slot] == canon or state.commands[slot] == legacy_bytes(m):
            return Replayed(op, slot)   # (an input journalled by revision 1: mutations.legacy_bytes)
        return conflict(f"sequence {seq} belongs to operation {op} with other canonical bytes; "
                        f"a new operation uses the next sequence {nxt}")
    caps = state.capacities
    if len(canon) > caps.command_bytes:
        return Refusal(413, "too_large", f"canonical command is {len(canon)} bytes; "
                       f"the command bytes bound per receipt is {caps.command_bytes}", table="command bytes")
    other = state.receipt_with_key(lineage, env.operation_key)
    if other is not None:
        return conflict(f"operation key is in use by sequence {int(state.receipts[other]['sequence'])} "
                        "until that receipt is retired")
    opid = operation_id(lineage, seq, env.operation_key)
    header = _op_header(lineage, seq, opid, env.operation_key, canon)
    if isinstance(m, RetireReceipts):
        return _retire(state, m, header, floor)
    if state.free_receipts() == 0:
        return table_full("receipts", caps.receipts)
    if isinstance(m, RegisterParticipant):
        decision = _register(state, header, prow)
    elif isinstance(m, CreateSpace):
        decision = _create_space(state, m, header)
    elif isinstance(m, SetMemberRights):
        decision = _set_member(state, m, header, prow, actor.grants)
    elif isinstance(m, SubmitInput):
        decision = _submit_input(state, m, header, prow, actor.grants, command.context)
    elif isinstance(m, CancelInput):
        decision = _cancel_input(state, m, header, prow, actor.grants)
    elif isinstance(m, PublishMemory):
        decision = _publish(state, command, header, prow)
    else:
        decision = _create_conversation(state, m, header, prow, actor.grants)
    if isinstance(decision, Refusal):
        return decision
    return Accepted((decision,), format_id(IdKind.OPERATION, lineage, opid),
                    202 if isinstance(decision, InputAdmitted) else 201)


_new = object.__new__


def _op_header(lineage: bytes, sequence: int, operation: bytes, operation_key: bytes, command: bytes) -> OpHeader:
    """OpHeader(...) (a frozen dataclass with no checks of its own) with its fields set directly: the same
    value, one decision at a time without the dataclass __init__'s five object.__setattr__ calls."""
    header = _new(OpHeader)
    f = header.__dict__
    f["lineage"], f["sequence"], f["operation"], f["operation_key"], f["command"] = \
        lineage, sequence, operation, operation_key, command
    return header


def _register(state: State, header: OpHeader, prow: int | None):
    if prow is not None:
        return conflict("participant is already registered")
    if state.n_participants >= state.capacities.participants:
        return table_full("participants", state.capacities.participants)
    return ParticipantRegistered(header, header.operation_key)


def _retire(state: State, m: RetireReceipts, header: OpHeader, floor: int) -> Decision:
    new = m.retry_floor
    if new < floor:
        return conflict(f"retry_floor {new} is below the current retry floor {floor}; it never moves back")
    if new > header.sequence:
        return conflict(f"retry_floor {new} is beyond this operation's sequence {header.sequence}")
    freed = 0
    for slot in state.receipts_of(header.lineage):
        row = state.receipts[slot]
        if int(row["sequence"]) < new:
            if int(row["terminal"]) != Terminal.SAVED:
                return conflict(f"receipt of sequence {int(row['sequence'])} has no saved terminal result")
            freed += 1
    if freed == 0 and state.free_receipts() == 0:   # (one that frees a receipt never adds one in all)
        return table_full("receipts", state.capacities.receipts)
    event = ReceiptsRetired(header, new)
    return Accepted((event,), format_id(IdKind.OPERATION, header.lineage, header.operation))


def _create_space(state: State, m: CreateSpace, header: OpHeader):
    if state.space_row(header.lineage, m.ident) is not None:
        return conflict(f"space {format_id(IdKind.SPACE, header.lineage, m.ident)} already exists")
    if state.n_spaces >= state.capacities.spaces:
        return table_full("spaces", state.capacities.spaces)
    return SpaceCreated(header, m.ident, m.scope)


def _visible_space(state: State, space: ResourceId, prow: int, grants, need: Rights, grant: str):
    """(space row, None) when the actor has `need` in it; else (None, 404 or 403)."""
    row = state.space_row(space.lineage, space.ident)
    bits = 0 if row is None else membership_bits(state, row, prow) & int(grants.rights())
    if row is None or not bits & _READ:   # (effective_rights, in ints)
        return None, not_found(f"space {space} not found")
    if not bits & int(need):
        return None, forbidden(f"{need.labels()[0]} right in space {space} needed ({grant} grant ∩ membership)")
    return row, None


def _set_member(state: State, m: SetMemberRights, header: OpHeader, prow: int, grants):
    row, refusal = _visible_space(state, m.space, prow, grants, Rights.MANAGE, "shared_manage")
    if refusal:
        return refusal
    target = state.participant_row(m.participant.lineage)
    if target is None or raw(state.participants["ident"][target]) != m.participant.ident:
        return not_found(f"participant {m.participant} not found")
    if int(state.spaces["owner"][row]) == target:
        return conflict(f"the owner's rights in space {m.space} cannot change")
    if state.member_row(row, target) is None and state.n_members >= state.capacities.members:
        return table_full("members", state.capacities.members)
    return MemberRightsSet(header, m.space.lineage, m.space.ident, m.participant.lineage, m.participant.ident,
                           m.rights)


def _create_conversation(state: State, m: CreateConversation, header: OpHeader, prow: int, grants):
    _, refusal = _visible_space(state, m.space, prow, grants, Rights.WRITE, "shared_write")
    if refusal:
        return refusal
    if state.conversation_row(header.lineage, m.ident) is not None:
        return conflict(f"conversation {format_id(IdKind.CONVERSATION, header.lineage, m.ident)} already exists")
    if state.n_conversations >= state.capacities.conversations:
        return table_full("conversations", state.capacities.conversations)
    return ConversationCreated(header, m.space.lineage, m.space.ident, m.ident)


def _writable_conversation(state: State, con: ResourceId, prow: int, grants):
    """(conversation row, None) when the actor has write rights in its space; else a 404/403 refusal."""
    row = state.conversation_row(con.lineage, con.ident)
    if row is None:
        return None, not_found(f"conversation {con} not found")
    space = int(state.conversations["space"][row])
    rights = effective_rights(state, space, prow, grants)
    if not rights & Rights.READ:
        return None, not_found(f"conversation {con} not found")
    if not rights & Rights.WRITE:
        return None, forbidden(f"write right in the space of conversation {con} needed "
                               "(shared_write grant ∩ membership)")
    return row, None


def _submit_input(state: State, m: SubmitInput, header: OpHeader, prow: int, grants, context):
    _, refusal = _writable_conversation(state, m.conversation, prow, grants)
    if refusal:
        return refusal
    if context is None:
        return Refusal(409, "unsupported", "this runtime has no model service: it does not execute inputs")
    model = context.models.get(m.model)
    if model is None:
        return Refusal(404, "model_not_found", f"model {m.model!r} is not served here; "
                       f"models: {', '.join(sorted(context.models)) or 'none'}")
    if m.media and not model.media:
        return Refusal(409, "unsupported_capability", f"model {m.model!r} is text-only: it has no media capability "
                       f"for the {len(m.media)} media reference(s) of this input")
    if model.context_tokens and m.max_output_tokens > model.context_tokens - 1:
        return Refusal(400, "context_length_exceeded",
                       f"max_output_tokens {m.max_output_tokens} cannot fit the context of model {m.model!r}: "
                       f"{model.context_tokens} tokens, the prompt included (at most "
                       f"{model.context_tokens - 1} output tokens)")
    pages = context.page_grant if m.pages is None else m.pages
    if pages > context.page_grant:
        return Refusal(409, "page_limit", f"pages {pages} exceeds the page grant {context.page_grant}")
    return InputAdmitted(header, m.conversation.lineage, m.conversation.ident, model.digest, pages)


def _cancel_input(state: State, m: CancelInput, header: OpHeader, prow: int, grants):
    _, refusal = _writable_conversation(state, m.conversation, prow, grants)
    if refusal:
        return refusal
    slot = state.receipt_slot(header.lineage, m.target_sequence)
    record = None if slot is None else state.executions[slot]
    if record is None:
        return not_found(f"sequence {m.target_sequence} is not an input of this participant")
    row = state.receipts[slot]
    if (raw(row["resource_lineage"]), raw(row["resource_ident"])) != (m.conversation.lineage, m.conversation.ident):
        return conflict(f"input {m.target_sequence} belongs to another conversation")
    if record.status.terminal:
        return conflict(f"input {m.target_sequence} already ended ({record.status.label}); nothing to cancel")
    if record.cancel_requested:
        return conflict(f"input {m.target_sequence} is already being cancelled")
    return InputCancelled(header, m.conversation.lineage, m.conversation.ident, m.target_sequence)


def _publish(state: State, command: Command, header: OpHeader, prow: int):
    m = command.mutation
    _, refusal = _visible_space(state, m.space, prow, command.actor.grants, Rights.MANAGE, "shared_manage")
    if refusal:
        return refusal
    if command.publisher is None:
        return Refusal(409, "unsupported", "this runtime keeps no memory: it does not publish")
    memory = command.publisher(state, command.actor, header, m)
    if isinstance(memory, Refusal):
        return memory
    return MemoryPublicationRecorded(header, m.space.lineage, m.space.ident, memory)
