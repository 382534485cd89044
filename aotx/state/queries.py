"""Reads, each checked with the reader's current grants ∩ stored membership.

A reader without the shared_read grant gets 403 (that says nothing about any resource);
a space or conversation the reader cannot read is 404, never 403, so existence does not
leak. Foreign participants' counters are null. Lists take a row cursor and a limit.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .decision import Refusal, forbidden, not_found
from .derive import lineage_for, operation_sequence
from .errors import IdError
from .ids import IdKind, ResourceId, format_id, parse_id
from .receipts import find_operation, receipt_json
from .rights import Actor, effective_rights
from .state import State
from .tables import raw
from .vocab import Rights, Scope

MAX_LIMIT = 1000


def read_grant_refusal(actor: Actor) -> Refusal | None:
    """403 when the actor lacks the shared_read grant, else None. Every read asks this first, before it
    looks anything up: the answer must not depend on whether the resource exists."""
    return None if actor.grants.shared_read else forbidden("reads need the shared_read grant")


def _bad_id(exc: IdError) -> Refusal:
    return Refusal(400, "invalid_request", str(exc))


def participant_view(state: State, actor: Actor, participant: str | None = None) -> dict[str, Any] | Refusal:
    """Own record (participant=None), or another participant's with its counters null."""
    own = lineage_for(actor.principal)
    if (refusal := read_grant_refusal(actor)) is not None:
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


def readable_space(state: State, actor: Actor, space: str) -> tuple[int, Rights] | Refusal:
    if (refusal := read_grant_refusal(actor)) is not None:
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
    found = readable_space(state, actor, space)
    return found if isinstance(found, Refusal) else _space_json(state, *found)


def _page(items_total: int, cursor: int, limit: int) -> range:
    return range(cursor, min(items_total, cursor + max(1, min(limit, MAX_LIMIT))))


def list_spaces(state: State, actor: Actor, cursor: int = 0, limit: int = 100) -> dict[str, Any] | Refusal:
    """Spaces the actor can read, in creation order; `next_cursor` is a row cursor or None."""
    if (refusal := read_grant_refusal(actor)) is not None:
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
    found = readable_space(state, actor, space)
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
    found = readable_space(state, actor, space)
    if isinstance(found, Refusal):
        return found
    cursor = max(cursor, 0)
    rows = [i for i in range(state.n_conversations) if int(state.conversations[i]["space"]) == found[0]]
    out = [_conversation_json(state, rows[i]) for i in _page(len(rows), cursor, limit)]
    end = cursor + len(out)
    return {"conversations": out, "next_cursor": str(end) if end < len(rows) else None}


def conversation_view(state: State, actor: Actor, conversation: str) -> dict[str, Any] | Refusal:
    row = _readable_conversation(state, actor, conversation)
    return row if isinstance(row, Refusal) else _conversation_json(state, row)


def readable_operation(state: State, actor: Actor, operation: str) -> tuple[int, bool] | Refusal:
    """(receipt slot, own?) of an operation whose receipt the actor may read: any own receipt, or
    another member's input in a conversation whose space the actor can read (current grants ∩
    membership, checked on every read). Anything else is 404 (a retired own handle 410). What the
    input made (result bytes, events) needs more: see `_readable_result`."""
    if (refusal := read_grant_refusal(actor)) is not None:
        return refusal
    own = lineage_for(actor.principal)
    try:
        rid = parse_id(operation, IdKind.OPERATION)
    except IdError as exc:
        return _bad_id(exc)
    if rid.lineage == own:
        found = find_operation(state, own, operation)
        return found if isinstance(found, Refusal) else (found, True)
    slot = state.receipt_slot(rid.lineage, operation_sequence(rid.ident))
    if slot is None or raw(state.receipts[slot]["operation"]) != rid.ident or state.executions[slot] is None:
        return not_found(f"operation {operation} not found")
    r = state.receipts[slot]
    con = state.conversation_row(raw(r["resource_lineage"]), raw(r["resource_ident"]))
    if con is None or not effective_rights(state, int(state.conversations[con]["space"]),
                                           state.participant_row(own), actor.grants) & Rights.READ:
        return not_found(f"operation {operation} not found")
    return slot, False


def operation_view(state: State, actor: Actor, operation: str) -> dict[str, Any] | Refusal:
    """The actor's own receipt, or a readable input of another member (its sequence null);
    anything else 404, a retired own handle 410."""
    found = readable_operation(state, actor, operation)
    if isinstance(found, Refusal):
        return found
    out = receipt_json(state, found[0])
    if not found[1]:
        out["sequence"] = None
    return out


def _utf8_or_none(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def span_fields(offset: int, span: bytes) -> dict[str, Any]:
    """The fields of a result read that describe the bytes `span` read at `offset` (in this order):
    offset, exact base64, byte length, next offset, and the text (null unless complete UTF-8)."""
    return {"offset": offset, "bytes": base64.b64encode(span).decode("ascii"), "byte_length": len(span),
            "next_offset": offset + len(span), "text": _utf8_or_none(span)}


def result_view(state: State, actor: Actor, operation: str, offset: int = 0,
                limit: int | None = None) -> dict[str, Any] | Refusal:
    """An input's saved result bytes from `offset`: exact base64, byte length, next_offset, text
    (null unless the span is complete UTF-8; never repaired), and once terminal the final token
    counts and finish."""
    found = readable_operation(state, actor, operation)
    if isinstance(found, Refusal):
        return found
    record = state.executions[found[0]]
    if record is None:
        return Refusal(409, "not_an_input", f"operation {operation} is not an input; it has no result")
    if found[1] and (refusal := _own_result_unreadable(state, actor, found[0], operation)) is not None:
        return refusal
    saved = record.output
    if offset > len(saved):
        return Refusal(416, "offset_out_of_range", f"offset {offset} is beyond the {len(saved)} saved bytes")
    end = len(saved) if limit is None else min(len(saved), offset + max(limit, 0))
    done = record.status.terminal
    return {"operation": operation, **span_fields(offset, saved[offset:end]),
            "execution": record.status.label, "complete": done and end == len(saved),
            "saved_bytes": len(saved),
            "input_tokens": record.input_tokens if done else None,
            "output_tokens": record.output_tokens if done else None,
            "finish": record.finish if done else None, "error": record.error if done else None}


def _own_result_unreadable(state: State, actor: Actor, slot: int, operation: str) -> Refusal | None:
    """An author keeps his receipt, but what his input made (its output was generated with the
    space's recalled memory) is conversation content: its result bytes and events need current
    read rights in the conversation's space, like any member's. 403, not 404: the receipt already
    tells him the operation and its conversation exist."""
    r = state.receipts[slot]
    con = state.conversation_row(raw(r["resource_lineage"]), raw(r["resource_ident"]))
    if con is not None and effective_rights(state, int(state.conversations[con]["space"]),
                                            state.participant_row(lineage_for(actor.principal)),
                                            actor.grants) & Rights.READ:
        return None
    return forbidden(f"the result of operation {operation} needs read rights in its conversation's space, "
                     "which you no longer have; its receipt stays readable")


def _readable_conversation(state: State, actor: Actor, conversation: str) -> int | Refusal:
    if (refusal := read_grant_refusal(actor)) is not None:
        return refusal
    try:
        rid = parse_id(conversation, IdKind.CONVERSATION)
    except IdError as exc:
        return _bad_id(exc)
    row = state.conversation_row(rid.lineage, rid.ident)
    if row is None or not effective_rights(state, int(state.conversations[row]["space"]),
                                           state.participant_row(lineage_for(actor.principal)),
                                           actor.grants) & Rights.READ:
        return not_found(f"conversation {conversation} not found")
    return row


def _input_event(state: State, slot: int, own: bytes) -> dict[str, Any]:
    r = state.receipts[slot]
    record = state.executions[slot]
    lineage = raw(r["lineage"])
    author = state.participants[state.participant_row(lineage)]
    command = json.loads(state.commands[slot])
    done = record.status.terminal
    return {"cursor": str(record.order),
            "operation": format_id(IdKind.OPERATION, lineage, raw(r["operation"])),
            "author": format_id(IdKind.PARTICIPANT, lineage, raw(author["ident"])),
            "sequence": str(int(r["sequence"])) if lineage == own else None,
            "text": command["text"], "model": command["model"], "media": command["media"],
            "execution": record.status.label, "saved_bytes": len(record.output),
            "input_tokens": record.input_tokens if done else None,
            "output_tokens": record.output_tokens if done else None,
            "finish": record.finish if done else None}


def conversation_events(state: State, actor: Actor, conversation: str, cursor: int = 0,
                        limit: int = 100) -> dict[str, Any] | Refusal:
    """A conversation's inputs in conversation input order after `cursor` (an order count; 0 = from
    the start), at most `limit`. `floor` is the lowest order still held (retired receipts leave
    the window); `gap` names the orders after the cursor that are retired and cannot be listed."""
    row = _readable_conversation(state, actor, conversation)
    if isinstance(row, Refusal):
        return row
    c = state.conversations[row]
    con_key = (raw(c["lineage"]), raw(c["ident"]))
    live: list[tuple[int, int]] = []
    for slot, record in enumerate(state.executions):
        if record is not None:
            r = state.receipts[slot]
            if (raw(r["resource_lineage"]), raw(r["resource_ident"])) == con_key:
                live.append((record.order, slot))
    live.sort()
    total = int(state.input_counts[row])
    floor = live[0][0] if live else total + 1
    after = [(order, slot) for order, slot in live if order > cursor]
    page = after[:max(1, min(limit, MAX_LIMIT))]
    own = lineage_for(actor.principal)
    expected = cursor + 1
    first = page[0][0] if page else total + 1
    gap = None if first <= expected else {"from": str(expected), "to": str(first - 1)}
    last = page[-1][0] if page else max(cursor, first - 1, 0)
    return {"conversation": conversation, "events": [_input_event(state, slot, own) for _, slot in page],
            "floor": str(floor), "gap": gap, "latest": str(total),
            "next_cursor": str(last) if len(after) > len(page) else None, "cursor": str(last)}
