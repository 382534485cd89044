"""Reads, each checked with the reader's current grants ∩ stored membership.

A reader without the shared_read grant gets 403 (that says nothing about any resource);
a space or conversation the reader cannot read is 404, never 403, so existence does not
leak. Foreign participants' counters are null. Lists take a row cursor and a limit.
"""

from __future__ import annotations

from typing import Any

from .decision import Refusal, forbidden, not_found
from .derive import lineage_for
from .errors import IdError
from .ids import IdKind, ResourceId, format_id, parse_id
from .receipts import find_operation, receipt_json
from .rights import Actor, effective_rights
from .state import State
from .tables import raw
from .vocab import Rights, Scope

MAX_LIMIT = 1000


def _reader(actor: Actor) -> Refusal | None:
    return None if actor.grants.shared_read else forbidden("reads need the shared_read grant")


def _bad_id(exc: IdError) -> Refusal:
    return Refusal(400, "invalid_request", str(exc))


def participant_view(state: State, actor: Actor, participant: str | None = None) -> dict[str, Any] | Refusal:
    """Own record (participant=None), or another participant's with its counters null."""
    own = lineage_for(actor.principal)
    if (refusal := _reader(actor)) is not None:
        return refusal
    if participant is None:
        prow = state.participant_row(own)
        if prow is None:
            return {"registered": False, "participant": None, "lineage": own.hex(), "next_sequence": "1",
                    "retry_floor": "1"}
        lineage = own
    else:
        try:
            rid = parse_id(participant, IdKind.PARTICIPANT)
        except IdError as exc:
            return _bad_id(exc)
        prow = state.participant_row(rid.lineage)
        if prow is None or raw(state.participants[prow]["ident"]) != rid.ident:
            return not_found(f"participant {participant} not found")
        lineage = rid.lineage
    row = state.participants[prow]
    mine = lineage == own
    return {"registered": True, "participant": format_id(IdKind.PARTICIPANT, lineage, raw(row["ident"])),
            "lineage": lineage.hex(),
            "next_sequence": str(int(row["next_sequence"])) if mine else None,
            "retry_floor": str(int(row["retry_floor"])) if mine else None}


def _space_json(state: State, row: int, rights: Rights) -> dict[str, Any]:
    s = state.spaces[row]
    owner = state.participants[int(s["owner"])]
    return {"id": format_id(IdKind.SPACE, raw(s["lineage"]), raw(s["ident"])),
            "scope": Scope(int(s["scope"])).label,
            "owner": format_id(IdKind.PARTICIPANT, raw(owner["lineage"]), raw(owner["ident"])),
            "permissions": rights.labels()}


def _readable_space(state: State, actor: Actor, space: str) -> tuple[int, Rights] | Refusal:
    if (refusal := _reader(actor)) is not None:
        return refusal
    try:
        rid: ResourceId = parse_id(space, IdKind.SPACE)
    except IdError as exc:
        return _bad_id(exc)
    row = state.space_row(rid.lineage, rid.ident)
    rights = Rights.NONE if row is None else effective_rights(
        state, row, state.participant_row(lineage_for(actor.principal)), actor.grants)
    if row is None or not rights & Rights.READ:
        return not_found(f"space {space} not found")
    return row, rights


def space_view(state: State, actor: Actor, space: str) -> dict[str, Any] | Refusal:
    found = _readable_space(state, actor, space)
    return found if isinstance(found, Refusal) else _space_json(state, *found)


def _page(items_total: int, cursor: int, limit: int) -> range:
    return range(cursor, min(items_total, cursor + max(1, min(limit, MAX_LIMIT))))


def list_spaces(state: State, actor: Actor, cursor: int = 0, limit: int = 100) -> dict[str, Any] | Refusal:
    """Spaces the actor can read, in creation order; `next_cursor` is a row cursor or None."""
    if (refusal := _reader(actor)) is not None:
        return refusal
    prow = state.participant_row(lineage_for(actor.principal))
    out, row = [], max(cursor, 0)
    limit = max(1, min(limit, MAX_LIMIT))
    while row < state.n_spaces and len(out) < limit:
        rights = effective_rights(state, row, prow, actor.grants)
        if rights & Rights.READ:
            out.append(_space_json(state, row, rights))
        row += 1
    return {"spaces": out, "next_cursor": str(row) if row < state.n_spaces else None}


def list_members(state: State, actor: Actor, space: str, cursor: int = 0, limit: int = 100):
    found = _readable_space(state, actor, space)
    if isinstance(found, Refusal):
        return found
    cursor = max(cursor, 0)
    rows = [i for i in range(state.n_members) if int(state.members[i]["space"]) == found[0]]
    out = []
    for i in _page(len(rows), cursor, limit):
        m = state.members[rows[i]]
        p = state.participants[int(m["participant"])]
        out.append({"participant": format_id(IdKind.PARTICIPANT, raw(p["lineage"]), raw(p["ident"])),
                    "permissions": Rights(int(m["rights"])).labels()})
    end = cursor + len(out)
    return {"members": out, "next_cursor": str(end) if end < len(rows) else None}


def _conversation_json(state: State, row: int) -> dict[str, Any]:
    c = state.conversations[row]
    s = state.spaces[int(c["space"])]
    p = state.participants[int(c["creator"])]
    return {"id": format_id(IdKind.CONVERSATION, raw(c["lineage"]), raw(c["ident"])),
            "space": format_id(IdKind.SPACE, raw(s["lineage"]), raw(s["ident"])),
            "creator": format_id(IdKind.PARTICIPANT, raw(p["lineage"]), raw(p["ident"]))}


def list_conversations(state: State, actor: Actor, space: str, cursor: int = 0, limit: int = 100):
    found = _readable_space(state, actor, space)
    if isinstance(found, Refusal):
        return found
    cursor = max(cursor, 0)
    rows = [i for i in range(state.n_conversations) if int(state.conversations[i]["space"]) == found[0]]
    out = [_conversation_json(state, rows[i]) for i in _page(len(rows), cursor, limit)]
    end = cursor + len(out)
    return {"conversations": out, "next_cursor": str(end) if end < len(rows) else None}


def conversation_view(state: State, actor: Actor, conversation: str) -> dict[str, Any] | Refusal:
    if (refusal := _reader(actor)) is not None:
        return refusal
    try:
        rid = parse_id(conversation, IdKind.CONVERSATION)
    except IdError as exc:
        return _bad_id(exc)
    row = state.conversation_row(rid.lineage, rid.ident)
    if row is None:
        return not_found(f"conversation {conversation} not found")
    space = int(state.conversations[row]["space"])
    prow = state.participant_row(lineage_for(actor.principal))
    if not effective_rights(state, space, prow, actor.grants) & Rights.READ:
        return not_found(f"conversation {conversation} not found")
    return _conversation_json(state, row)


def operation_view(state: State, actor: Actor, operation: str) -> dict[str, Any] | Refusal:
    """The actor's own receipt; another lineage's handle is 404, a retired one 410."""
    if (refusal := _reader(actor)) is not None:
        return refusal
    found = find_operation(state, lineage_for(actor.principal), operation)
    return found if isinstance(found, Refusal) else receipt_json(state, found)
