"""apply_stored_into(state, event): the stored state after one STORED event. Pure data, in place on a
StoredState its caller owns (the projector's, or a round's fork).

Every check runs before the first write, so an event that contradicts the state (an id that exists
or does not, a finished response, events not continuing at the saved count, a conversation together
with previous_response_id…) raises StoredApplyError and changes nothing: at boot that fails the
replay closed, as the shared core's apply does. Limits are not checked here (decide enforces them
against the runtime's settings; a log written under larger limits still replays).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .errors import StoredApplyError
from .events import (ConversationCreated, ConversationDeleted, ConversationItemDeleted, ConversationItemsAdded,
                     ConversationMetadataSet, KeyAnswered, KeyFinished, KeyStarted, ResponseCancelRequested,
                     ResponseCreated, ResponseDeleted, ResponseEventsAppended, ResponseFinished, StoredEvent,
                     StoredExpired)
from .grown import grown
from .state import (Book, ConversationRecord, KeyRecord, ResponseRecord, StoredState, conversation_size,
                    finished_size, response_size)
from .vocab import ResponseStatus

ADDS_TO_CONVERSATION = (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE)


def _fail(event: StoredEvent, message: str) -> StoredApplyError:
    return StoredApplyError(f"{event.KIND} of {event.identity!r:.80}: {message}")


def _response(state: StoredState, event, *, open_: bool = False) -> ResponseRecord:
    record = state.book(event.identity).responses.get(event.response)
    if record is None:
        raise _fail(event, f"response {event.response} does not exist")
    if open_ and record.finished is not None:
        raise _fail(event, f"response {event.response} is finished ({record.status.wire})")
    return record


def _conversation(state: StoredState, event) -> ConversationRecord:
    record = state.book(event.identity).conversations.get(event.conversation)
    if record is None:
        raise _fail(event, f"conversation {event.conversation} does not exist")
    return record


def _key(state: StoredState, event, *, open_: bool = False) -> KeyRecord:
    record = state.book(event.identity).keys.get((event.surface, event.key))
    if record is None:
        raise _fail(event, f"key {event.surface}/{event.key!r:.80} does not exist")
    if open_ and record.finished is not None:
        raise _fail(event, f"key {event.surface}/{event.key!r:.80} is finished")
    return record


def _items(event, ids: tuple[str, ...], items: tuple[bytes, ...], present: tuple[str, ...] = ()) -> None:
    if len(ids) != len(items):
        raise _fail(event, f"{len(ids)} item ids for {len(items)} items")
    if len(set(ids)) != len(ids):
        raise _fail(event, "an item id is named twice")
    clash = set(ids).intersection(present)
    if clash:
        raise _fail(event, f"item {sorted(clash)[0]} is already in the conversation")


def _created(state: StoredState, e: ResponseCreated) -> None:
    book = state.book(e.identity)
    if e.response in book.responses:
        raise _fail(e, f"response {e.response} exists")
    if e.previous_response and e.conversation:
        raise _fail(e, "a conversation together with previous_response_id")
    if e.previous_response:
        previous = book.responses.get(e.previous_response)
        if previous is None or previous.finished is None:
            raise _fail(e, f"previous response {e.previous_response} is not a finished response")
    if e.conversation and e.conversation not in book.conversations:
        raise _fail(e, f"conversation {e.conversation} does not exist")
    _items(e, e.input_ids, e.input)
    size = response_size(e)
    status = ResponseStatus.QUEUED if e.background else ResponseStatus.IN_PROGRESS
    state.writable_book(e.identity).responses[e.response] = ResponseRecord(e, status, size=size)
    state.count(responses=1, bytes=size)


def _events(state: StoredState, e: ResponseEventsAppended) -> None:
    record = _response(state, e, open_=True)
    if e.first != len(record.events):
        raise _fail(e, f"events from {e.first}, but {len(record.events)} are saved")
    size = sum(map(len, e.events))
    state.writable_book(e.identity).responses[e.response] = ResponseRecord(   # = replace(record, events=…, …)
        record.created, ResponseStatus.IN_PROGRESS if e.events else record.status, grown(record.events, e.events),
        record.finished, record.cancel_requested, record.size + size)
    state.count(bytes=size)


def _cancel(state: StoredState, e: ResponseCancelRequested) -> None:
    record = _response(state, e, open_=True)
    state.writable_book(e.identity).responses[e.response] = replace(record, cancel_requested=True)


def _finished(state: StoredState, e: ResponseFinished) -> None:
    record = _response(state, e, open_=True)
    _items(e, e.output_ids, e.output)
    book = state.book(e.identity)
    conversation = book.conversations.get(record.created.conversation) if record.created.conversation else None
    adds = conversation is not None and e.status in ADDS_TO_CONVERSATION
    if adds:
        _items(e, record.created.input_ids + e.output_ids, record.created.input + e.output, conversation.item_ids)
    size = finished_size(e)
    book = state.writable_book(e.identity)
    book.responses[e.response] = ResponseRecord(record.created, e.status, record.events, e, record.cancel_requested,
                                                record.size + size)   # = replace(record, status=…, finished=e, …)
    state.count(bytes=size)
    if adds:
        _add_items(state, book, conversation, record.created.input_ids + e.output_ids,
                   record.created.input + e.output)


def _deleted(state: StoredState, e: ResponseDeleted) -> None:
    record = _response(state, e)
    del state.writable_book(e.identity).responses[e.response]
    state.count(responses=-1, bytes=-record.size)
    state.drop_empty(e.identity)


def _add_items(state: StoredState, book: Book, record: ConversationRecord, ids: tuple, items: tuple) -> None:
    size = sum(map(len, items))
    book.conversations[record.id] = replace(record, item_ids=grown(record.item_ids, ids), items=grown(record.items, items),
                                            size=record.size + size)
    state.count(items=len(ids), bytes=size)


def _conversation_created(state: StoredState, e: ConversationCreated) -> None:
    if e.conversation in state.book(e.identity).conversations:
        raise _fail(e, f"conversation {e.conversation} exists")
    _items(e, e.item_ids, e.items)
    size = conversation_size(e)
    state.writable_book(e.identity).conversations[e.conversation] = ConversationRecord(
        e.conversation, e.created_at, e.metadata, e.item_ids, e.items, size)
    state.count(conversations=1, items=len(e.item_ids), bytes=size)


def _items_added(state: StoredState, e: ConversationItemsAdded) -> None:
    record = _conversation(state, e)
    _items(e, e.item_ids, e.items, record.item_ids)
    _add_items(state, state.writable_book(e.identity), record, e.item_ids, e.items)


def _item_deleted(state: StoredState, e: ConversationItemDeleted) -> None:
    record = _conversation(state, e)
    if e.item not in record.item_ids:
        raise _fail(e, f"item {e.item} is not in conversation {e.conversation}")
    at = record.item_ids.index(e.item)
    size = len(record.items[at])
    state.writable_book(e.identity).conversations[e.conversation] = replace(
        record, item_ids=record.item_ids[:at] + record.item_ids[at + 1:],
        items=record.items[:at] + record.items[at + 1:], size=record.size - size)
    state.count(items=-1, bytes=-size)


def _metadata_set(state: StoredState, e: ConversationMetadataSet) -> None:
    record = _conversation(state, e)
    delta = len(e.metadata) - len(record.metadata)
    state.writable_book(e.identity).conversations[e.conversation] = replace(
        record, metadata=e.metadata, size=record.size + delta)
    state.count(bytes=delta)


def _conversation_deleted(state: StoredState, e: ConversationDeleted) -> None:
    record = _conversation(state, e)
    del state.writable_book(e.identity).conversations[e.conversation]
    state.count(conversations=-1, items=-len(record.item_ids), bytes=-record.size)
    state.drop_empty(e.identity)


def key_size(e: KeyStarted) -> int:
    return len(e.surface) + len(e.key) + len(e.digest) + len(e.bound)


def _key_started(state: StoredState, e: KeyStarted) -> None:
    if (e.surface, e.key) in state.book(e.identity).keys:
        raise _fail(e, f"key {e.surface}/{e.key!r:.80} exists")
    size = key_size(e)
    state.writable_book(e.identity).keys[(e.surface, e.key)] = KeyRecord(e, size=size)
    state.count(keys=1, bytes=size)


def _key_answered(state: StoredState, e: KeyAnswered) -> None:
    record = _key(state, e, open_=True)
    if e.first != len(record.chunks):
        raise _fail(e, f"chunks from {e.first}, but {len(record.chunks)} are saved")
    size = sum(map(len, e.chunks))
    state.writable_book(e.identity).keys[(e.surface, e.key)] = replace(
        record, chunks=grown(record.chunks, e.chunks), size=record.size + size)
    state.count(bytes=size)


def _key_finished(state: StoredState, e: KeyFinished) -> None:
    record = _key(state, e, open_=True)
    size = len(e.headers)
    state.writable_book(e.identity).keys[(e.surface, e.key)] = replace(record, finished=e, size=record.size + size)
    state.count(bytes=size)


def _expired(state: StoredState, e: StoredExpired) -> None:
    book = state.book(e.identity)
    if len(e.key_surfaces) != len(e.keys):
        raise _fail(e, f"{len(e.key_surfaces)} surfaces for {len(e.keys)} keys")
    pairs = list(zip(e.key_surfaces, e.keys))
    missing = [r for r in e.responses if r not in book.responses] + [f"{s}/{k}" for s, k in pairs if (s, k) not in book.keys]
    if missing or len(set(pairs)) != len(pairs):
        raise _fail(e, f"{missing[0] if missing else 'a key'} is not there to expire (or named twice)")
    book = state.writable_book(e.identity)
    size = sum(book.responses.pop(r).size for r in e.responses) + sum(book.keys.pop(p).size for p in pairs)
    state.count(responses=-len(e.responses), keys=-len(pairs), bytes=-size)
    state.drop_empty(e.identity)


_APPLY: dict[type, Callable] = {
    ResponseCreated: _created, ResponseEventsAppended: _events, ResponseCancelRequested: _cancel,
    ResponseFinished: _finished, ResponseDeleted: _deleted, ConversationCreated: _conversation_created,
    ConversationItemsAdded: _items_added, ConversationItemDeleted: _item_deleted,
    ConversationMetadataSet: _metadata_set, ConversationDeleted: _conversation_deleted, KeyStarted: _key_started,
    KeyAnswered: _key_answered, KeyFinished: _key_finished, StoredExpired: _expired}


def apply_stored_into(state: StoredState, event: StoredEvent) -> None:
    """Apply one stored event to `state` in place; StoredApplyError (and no change) if it does not fit."""
    handler = _APPLY.get(type(event))
    if handler is None:
        raise StoredApplyError(f"{type(event).__name__} is not a stored event")
    handler(state, event)
    state.applied += 1


def apply_stored(state: StoredState, event: StoredEvent) -> StoredState:
    """The state after `event`; `state` itself is not changed."""
    new = state.fork()
    apply_stored_into(new, event)
    return new
