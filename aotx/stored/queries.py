"""Reads of the stored state (pure): what one identity may see at time `now`.

Each identity sees only its own Book, so another identity's id reads exactly as an unknown one
(Reason.UNKNOWN, which the surfaces answer 404). A finished response past `response_ttl` and a
finished key past `idempotency_ttl` read as absent before the sweep journals their expiry.
Lists page as OpenAI's do: `after` an item id of the list (in the order asked), `limit` 1..100,
`order` "asc" or "desc"; the answer has `data`, `first_id`, `last_id`, `has_more`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Union

from .limits import StoredLimits
from .outcomes import KeyLookup, StoredRefusal, refuse
from .state import Book, ConversationRecord, ResponseRecord, StoredState
from .vocab import KeyEnd, KeyState, Reason, ResponseStatus

MAX_PAGE = 100


@dataclass(frozen=True)
class Page:
    data: list[dict]
    first_id: Optional[str]
    last_id: Optional[str]
    has_more: bool


@dataclass(frozen=True)
class ResponseView:
    """A stored response as the surfaces build their object from it (JSON values parsed)."""

    id: str
    created_at: int
    model: str
    status: ResponseStatus
    background: bool
    previous_response_id: Optional[str]
    conversation: Optional[str]
    instructions: Any
    tools: list
    params: dict
    metadata: dict
    input_count: int
    output: list[dict]
    usage: Any
    error: Any
    incomplete_details: Any
    finished_at: Optional[int]
    cancel_requested: bool
    events: int                       # stream events saved (the next sequence_number)


@dataclass(frozen=True)
class ResponseEvents:
    """Saved stream events after a position: (sequence_number, bytes) in order; `finished` once the
    response ended (no event follows `next - 1`)."""

    events: tuple[tuple[int, bytes], ...]
    next: int
    finished: bool
    status: ResponseStatus


@dataclass(frozen=True)
class ConversationView:
    id: str
    created_at: int
    metadata: dict
    items: int


def _parse(data: bytes) -> Any:
    return json.loads(data)


def live_response(book: Book, response_id: str, now: int, limits: StoredLimits) -> Optional[ResponseRecord]:
    record = book.responses.get(response_id)
    if record is None or (record.finished is not None and limits.response_expired(record.created.created_at, now)):
        return None
    return record


def live_conversation(book: Book, conversation_id: str) -> Optional[ConversationRecord]:
    return book.conversations.get(conversation_id)


def _unknown_response(response_id: Any, param: str = "response_id") -> StoredRefusal:
    return refuse(Reason.UNKNOWN, f"No response found with id '{str(response_id)[:80]}'.", param)


def _unknown_conversation(conversation_id: Any) -> StoredRefusal:
    return refuse(Reason.UNKNOWN, f"No conversation found with id '{str(conversation_id)[:80]}'.", "conversation_id")


def response(state: StoredState, identity: str, response_id: str, now: int,
             limits: StoredLimits) -> Union[ResponseView, StoredRefusal]:
    r = live_response(state.book(identity), response_id, now, limits)
    if r is None:
        return _unknown_response(response_id)
    c, f = r.created, r.finished
    return ResponseView(
        c.response, c.created_at, c.model, r.status, c.background, c.previous_response or None,
        c.conversation or None, _parse(c.instructions), _parse(c.tools), _parse(c.params), _parse(c.metadata),
        len(c.input), [_parse(x) for x in f.output] if f else [], _parse(f.usage) if f else None,
        _parse(f.error) if f else None, _parse(f.incomplete_details) if f else None, f.finished_at if f else None,
        r.cancel_requested, len(r.events))


def _page(ids: tuple[str, ...], items: tuple[bytes, ...], after: Optional[str], limit: int,
          order: str) -> Union[Page, StoredRefusal]:
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        return refuse(Reason.BAD_CURSOR, f"'limit' must be an integer in 1..{MAX_PAGE}", "limit")
    if order not in ("asc", "desc"):
        return refuse(Reason.BAD_CURSOR, "'order' must be 'asc' or 'desc'", "order")
    index = list(range(len(ids))) if order == "asc" else list(range(len(ids) - 1, -1, -1))
    start = 0
    if after is not None:
        at = next((k for k, i in enumerate(index) if ids[i] == after), None)
        if at is None:
            return refuse(Reason.BAD_CURSOR, f"'after' {str(after)[:80]!r} is not an item of this list", "after")
        start = at + 1
    chosen = index[start:start + limit]
    return Page([_parse(items[i]) for i in chosen], ids[chosen[0]] if chosen else None,
                ids[chosen[-1]] if chosen else None, start + limit < len(index))


def input_items(state: StoredState, identity: str, response_id: str, now: int, limits: StoredLimits, *,
                after: Optional[str] = None, limit: int = 20, order: str = "desc") -> Union[Page, StoredRefusal]:
    """The input items of this response's own request (not those of its previous responses)."""
    r = live_response(state.book(identity), response_id, now, limits)
    if r is None:
        return _unknown_response(response_id)
    return _page(r.created.input_ids, r.created.input, after, limit, order)


def chain(state: StoredState, identity: str, previous_response_id: str, now: int,
          limits: StoredLimits) -> Union[list[dict], StoredRefusal]:
    """What a response continuing `previous_response_id` carries over: every earlier response's input
    items then its output items (function calls and their outputs included), oldest first. The
    instructions are not carried over. A link that is unknown (deleted, expired) or unfinished refuses."""
    book = state.book(identity)
    links: list[ResponseRecord] = []
    at, seen = previous_response_id, set()
    while at:
        r = live_response(book, at, now, limits)
        if r is None or at in seen:
            return _unknown_response(at, "previous_response_id")
        if r.finished is None:
            return refuse(Reason.PENDING, f"Previous response '{at}' is {r.status.wire}; it has not finished.",
                          "previous_response_id")
        links.append(r)
        seen.add(at)
        at = r.created.previous_response
    out: list[dict] = []
    for r in reversed(links):
        out += [_parse(x) for x in r.created.input]
        out += [_parse(x) for x in r.finished.output]
    return out


def response_events(state: StoredState, identity: str, response_id: str, now: int, limits: StoredLimits,
                    after: Optional[int] = None) -> Union[ResponseEvents, StoredRefusal]:
    """The saved stream events with sequence_number > `after` (all when None)."""
    r = live_response(state.book(identity), response_id, now, limits)
    if r is None:
        return _unknown_response(response_id)
    if after is not None and (type(after) is not int or after < 0):
        return refuse(Reason.BAD_CURSOR, "'starting_after' must be a sequence number (an integer ≥ 0)",
                      "starting_after")
    start = 0 if after is None else min(after + 1, len(r.events))
    return ResponseEvents(tuple((n, r.events[n]) for n in range(start, len(r.events))), len(r.events),
                          r.finished is not None, r.status)


def conversation(state: StoredState, identity: str, conversation_id: str) -> Union[ConversationView, StoredRefusal]:
    c = live_conversation(state.book(identity), conversation_id)
    if c is None:
        return _unknown_conversation(conversation_id)
    return ConversationView(c.id, c.created_at, _parse(c.metadata), len(c.item_ids))


def conversation_items(state: StoredState, identity: str, conversation_id: str, *, after: Optional[str] = None,
                       limit: int = 20, order: str = "desc") -> Union[Page, StoredRefusal]:
    c = live_conversation(state.book(identity), conversation_id)
    if c is None:
        return _unknown_conversation(conversation_id)
    return _page(c.item_ids, c.items, after, limit, order)


def conversation_item(state: StoredState, identity: str, conversation_id: str,
                      item_id: str) -> Union[dict, StoredRefusal]:
    c = live_conversation(state.book(identity), conversation_id)
    if c is None:
        return _unknown_conversation(conversation_id)
    if item_id not in c.item_ids:
        return refuse(Reason.UNKNOWN, f"No item found with id '{str(item_id)[:80]}' in conversation "
                                      f"'{conversation_id}'.", "item_id")
    return _parse(c.items[c.item_ids.index(item_id)])


def all_conversation_items(state: StoredState, identity: str, conversation_id: str) -> Union[list[dict], StoredRefusal]:
    """Every item of a conversation, in order (what a response with `conversation` continues)."""
    c = live_conversation(state.book(identity), conversation_id)
    if c is None:
        return _unknown_conversation(conversation_id)
    return [_parse(x) for x in c.items]


def key_lookup(book: Book, surface: str, key: str, digest: bytes, now: int, limits: StoredLimits) -> KeyLookup:
    record = book.keys.get((surface, key))
    if record is None or (record.finished is not None and (record.finished.end is KeyEnd.RELEASED
                                                           or limits.key_expired(record.started.started_at, now))):
        return KeyLookup(KeyState.ABSENT)
    s = record.started
    if s.digest != digest:
        return KeyLookup(KeyState.MISMATCH, s.bound, started_at=s.started_at)
    f = record.finished
    if f is None:
        return KeyLookup(KeyState.RUNNING, s.bound, record.chunks, started_at=s.started_at)
    return KeyLookup(KeyState.FINISHED, s.bound, record.chunks, f.end, f.status, f.headers, s.started_at)


def key(state: StoredState, identity: str, surface: str, key_: str, digest: bytes, now: int,
        limits: StoredLimits) -> KeyLookup:
    return key_lookup(state.book(identity), surface, key_, digest, now, limits)
