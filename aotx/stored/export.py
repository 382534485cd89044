"""The stored state as plain msgpack-able values and back (snapshots), and its digest (state hashes).

    {"books": [[identity, {"responses": [[created body, status, [event bytes…], finished body | None,
                                          cancel requested]…],
                           "conversations": [[id, created_at, metadata, [item id…], [item bytes…]]…],
                           "keys": [[started body, [chunk bytes…], finished body | None]…]}]…],
     "applied": n}

Identities sorted, records in the order they were created, event bodies as the codec registry writes
them (aotx/stored/codec.py). Sizes and totals are derived again on import, never stored. Import checks
every type and decodes every body strictly: StoredError (a StateError) for anything else.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack

from ..journal.registry import REGISTRY
from .apply import key_size
from .errors import StoredError
from .events import ConversationCreated, KeyFinished, KeyStarted, ResponseCreated, ResponseFinished
from .state import (Book, ConversationRecord, KeyRecord, ResponseRecord, StoredState, Totals, finished_size,
                    response_size)
from .vocab import ResponseStatus

_PERSON = b"aotx-stored-v1"
_BOOK_KEYS = {"responses", "conversations", "keys"}


def export_stored(state: StoredState) -> dict[str, Any]:
    books = []
    for identity in sorted(state.books):
        book = state.books[identity]
        if not book:
            continue
        books.append([identity, {
            "responses": [[REGISTRY.body(r.created), int(r.status), list(r.events),
                           None if r.finished is None else REGISTRY.body(r.finished), r.cancel_requested]
                          for r in book.responses.values()],
            "conversations": [[c.id, c.created_at, c.metadata, list(c.item_ids), list(c.items)]
                              for c in book.conversations.values()],
            "keys": [[REGISTRY.body(k.started), list(k.chunks), None if k.finished is None else REGISTRY.body(k.finished)]
                     for k in book.keys.values()]}])
    return {"books": books, "applied": state.applied}


def stored_digest(state: StoredState) -> str:
    """BLAKE2b-256 of everything stored (not the applied counter): live = replay = snapshot."""
    doc = export_stored(state)
    return hashlib.blake2b(msgpack.packb(doc["books"], use_bin_type=True), digest_size=32, person=_PERSON).hexdigest()


def _bad(message: str) -> StoredError:
    return StoredError(f"stored state: {message}")


def _list(value: Any, where: str, n: int | None = None) -> list:
    if not isinstance(value, list) or (n is not None and len(value) != n):
        raise _bad(f"{where} is not a list{'' if n is None else f' of {n}'}")
    return value


def _blobs(value: Any, where: str) -> tuple[bytes, ...]:
    if not all(isinstance(x, bytes) for x in _list(value, where)):
        raise _bad(f"{where} holds a value that is not bytes")
    return tuple(value)


def _response(entry: Any) -> ResponseRecord:
    created_body, status, events, finished_body, cancel = _list(entry, "a response", 5)
    created = REGISTRY.decode_as(ResponseCreated, created_body)
    finished = None if finished_body is None else REGISTRY.decode_as(ResponseFinished, finished_body)
    if type(status) is not int or status not in ResponseStatus._value2member_map_ or type(cancel) is not bool:
        raise _bad(f"response {created.response}: status {status!r:.20} / cancel flag {cancel!r:.20}")
    status = ResponseStatus(status)
    if (finished is not None and (finished.status != status or finished.identity != created.identity
                                  or finished.response != created.response)) or (finished is None and status.terminal):
        raise _bad(f"response {created.response}: status {status.wire} does not fit its finish")
    events = _blobs(events, "response events")
    size = response_size(created) + sum(map(len, events)) + (finished_size(finished) if finished else 0)
    return ResponseRecord(created, status, events, finished, cancel, size)


def _conversation(entry: Any) -> ConversationRecord:
    cid, created_at, metadata, ids, items = _list(entry, "a conversation", 5)
    ids = tuple(_list(ids, "conversation item ids"))
    probe = ConversationCreated("x", cid, created_at, metadata, ids, _blobs(items, "conversation items"))
    probe = REGISTRY.decode_as(ConversationCreated, REGISTRY.body(probe))   # every field's wire check
    if len(probe.item_ids) != len(probe.items):
        raise _bad(f"conversation {cid}: {len(ids)} ids for {len(items)} items")
    return ConversationRecord(cid, created_at, metadata, probe.item_ids, probe.items,
                              len(metadata) + sum(map(len, probe.items)))


def _key(entry: Any) -> KeyRecord:
    started_body, chunks, finished_body = _list(entry, "a key", 3)
    started = REGISTRY.decode_as(KeyStarted, started_body)
    finished = None if finished_body is None else REGISTRY.decode_as(KeyFinished, finished_body)
    if finished is not None and (finished.identity, finished.surface, finished.key) != \
            (started.identity, started.surface, started.key):
        raise _bad(f"key {started.surface}/{started.key!r:.40}: its finish names another key")
    chunks = _blobs(chunks, "key chunks")
    return KeyRecord(started, chunks, finished,
                     key_size(started) + sum(map(len, chunks)) + (len(finished.headers) if finished else 0))


def import_stored(doc: Any) -> StoredState:
    if not isinstance(doc, dict) or set(doc) != {"books", "applied"} or type(doc["applied"]) is not int:
        raise _bad("not a map of books and the applied count")
    state = StoredState(applied=doc["applied"])
    t = dict(responses=0, conversations=0, keys=0, items=0, bytes=0)
    last = None
    for pair in _list(doc["books"], "books"):
        identity, parts = _list(pair, "a book", 2)
        if not isinstance(identity, str) or (last is not None and identity <= last) or \
                not isinstance(parts, dict) or set(parts) != _BOOK_KEYS:
            raise _bad(f"book {identity!r:.40} is out of order or not a map of {sorted(_BOOK_KEYS)}")
        last, book = identity, Book()
        for r in map(_response, _list(parts["responses"], "responses")):
            if r.created.identity != identity or r.created.response in book.responses:
                raise _bad(f"response {r.created.response} is not {identity!r:.40}'s or is named twice")
            book.responses[r.created.response] = r
        for c in map(_conversation, _list(parts["conversations"], "conversations")):
            if c.id in book.conversations or len(set(c.item_ids)) != len(c.item_ids):
                raise _bad(f"conversation {c.id} is named twice or names an item twice")
            book.conversations[c.id] = c
        for k in map(_key, _list(parts["keys"], "keys")):
            s = k.started
            if s.identity != identity or (s.surface, s.key) in book.keys:
                raise _bad(f"key {s.surface}/{s.key!r:.40} is not {identity!r:.40}'s or is named twice")
            book.keys[(s.surface, s.key)] = k
        if not book:
            raise _bad(f"book {identity!r:.40} is empty")
        state.books[identity] = book
        t["responses"] += len(book.responses)
        t["conversations"] += len(book.conversations)
        t["keys"] += len(book.keys)
        t["items"] += sum(len(c.item_ids) for c in book.conversations.values())
        t["bytes"] += sum(x.size for part in (book.responses, book.conversations, book.keys) for x in part.values())
    state.totals = Totals(**t)
    return state
