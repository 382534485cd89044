"""decide(state, identity, command, now, limits) -> Accepted(events) or a StoredRefusal. Pure.

The checks a client can fail come here, before anything is journalled: malformed ids or JSON (400),
unknown ids — another identity's are unknown too, each identity's records are its own (404), ids
taken (409), a conversation together with previous_response_id (400), events that do not continue
the saved count, writes to a finished response or key (409), an idempotency key reused with another
body (422), one command over `command_bytes` (413), a full table or byte budget (507). An accepted
command's events always apply (aotx.stored.apply) to the state they were decided on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from .. import strict_json
from .commands import (AddConversationItems, AppendKeyAnswer, AppendResponseEvents, BeginKey, CancelResponse,
                       CreateConversation, CreateResponse, DeleteConversation, DeleteConversationItem,
                       DeleteResponse, Expire, FinishKey, FinishResponse, StoredCommand, UpdateConversation)
from .events import (ConversationCreated, ConversationDeleted, ConversationItemDeleted, ConversationItemsAdded,
                     ConversationMetadataSet, KeyAnswered, KeyFinished, KeyStarted, ResponseCancelRequested,
                     ResponseCreated, ResponseDeleted, ResponseEventsAppended, ResponseFinished, StoredEvent,
                     StoredExpired)
from .ids import SURFACES, is_conversation_id, is_identity, is_item_id, is_key, is_response_id, is_surface
from .limits import StoredLimits
from .outcomes import KeyLookup, StoredRefusal, refuse
from .queries import key_lookup, live_conversation, live_response
from .state import StoredState
from .vocab import KeyEnd, KeyState, Reason, ResponseStatus

EXPIRE_BATCH = 1000   # records named by one expiry event (the sweep comes back for the rest)


@dataclass(frozen=True)
class Accepted:
    events: tuple[StoredEvent, ...]
    key: Optional[KeyLookup] = None      # BeginKey: the key's state after it


Decision = Union[Accepted, StoredRefusal]


class _Refused(Exception):
    def __init__(self, refusal: StoredRefusal) -> None:
        self.refusal = refusal


def _no(reason: Reason, message: str, param: Optional[str] = None) -> _Refused:
    return _Refused(refuse(reason, message, param))


class _Ctx:
    """One decision: the identity's records, the clock, the limits, and the bytes written so far."""

    def __init__(self, state: StoredState, identity: str, now: int, limits: StoredLimits) -> None:
        self.state, self.identity, self.now, self.limits = state, identity, now, limits
        self.book = state.book(identity)
        self.size = 0

    def json(self, value: Any, param: str, want: type | None = None) -> bytes:
        if want is not None and not isinstance(value, want):
            raise _no(Reason.INVALID, f"'{param}' must be a JSON {'object' if want is dict else 'array'}", param)
        try:
            data = strict_json.compact(value).encode("utf-8")
        except (TypeError, ValueError) as exc:   # not JSON data, NaN, a cycle, a lone surrogate
            raise _no(Reason.INVALID, f"'{param}' is not JSON: {exc}", param) from None
        self.size += len(data)
        if self.size > self.limits.command_bytes:
            raise _no(Reason.TOO_LARGE, f"the stored JSON of this request is over {self.limits.command_bytes} bytes",
                      param)
        return data

    def blobs(self, values: Sequence[bytes], param: str) -> tuple[bytes, ...]:
        if not all(isinstance(v, bytes) for v in values):
            raise _no(Reason.INVALID, f"'{param}' must be bytes", param)
        self.size += sum(map(len, values))
        if self.size > self.limits.command_bytes:
            raise _no(Reason.TOO_LARGE, f"'{param}' is over {self.limits.command_bytes} bytes", param)
        return tuple(values)

    def items(self, items: Sequence[Any], param: str, present: tuple[str, ...] = ()) -> tuple[tuple, tuple]:
        ids, data = [], []
        for k, item in enumerate(items):
            where = f"{param}[{k}]"
            if not isinstance(item, dict):
                raise _no(Reason.INVALID, f"'{where}' must be an object", where)
            if not is_item_id(item.get("id")):
                raise _no(Reason.INVALID, f"'{where}.id' must be an item id (prefix_ + 24..64 hex)", f"{where}.id")
            if item["id"] in ids or item["id"] in present:
                raise _no(Reason.EXISTS, f"item {item['id']} is already there", f"{where}.id")
            ids.append(item["id"])
            data.append(self.json(item, where))
        return tuple(ids), tuple(data)

    def room(self, table: str, more: int = 1, extra: int = 0) -> None:
        """Refuse (FULL) when `more` records of `table` (and `extra` bytes besides the command's) do not fit."""
        totals, limits = self.state.totals, self.limits
        if more and getattr(totals, table) + more > getattr(limits, table):
            raise _no(Reason.FULL, f"the stored {table} table is full ({getattr(limits, table)} rows)")
        if totals.bytes + self.size + extra > limits.bytes:
            raise _no(Reason.FULL, f"the stored byte budget is full ({limits.bytes} bytes)")

    def response(self, response_id: Any, param: str = "response_id", *, open_: bool = False):
        if not is_response_id(response_id):
            raise _no(Reason.INVALID, f"'{param}' must be a response id (resp_ + 24..64 hex)", param)
        record = live_response(self.book, response_id, self.now, self.limits)
        if record is None:
            raise _no(Reason.UNKNOWN, f"no response with id {response_id}", param)
        if open_ and record.finished is not None:
            raise _no(Reason.FINISHED, f"response {response_id} is {record.status.wire}", param)
        return record

    def conversation(self, conversation_id: Any, param: str = "conversation_id"):
        if not is_conversation_id(conversation_id):
            raise _no(Reason.INVALID, f"'{param}' must be a conversation id (conv_ + 24..64 hex)", param)
        record = live_conversation(self.book, conversation_id)
        if record is None:
            raise _no(Reason.UNKNOWN, f"no conversation with id {conversation_id}", param)
        return record

    def key(self, surface: Any, key: Any):
        if not is_surface(surface):
            raise _no(Reason.INVALID, f"'surface' must be one of {', '.join(SURFACES)}", "surface")
        if not is_key(key):
            raise _no(Reason.INVALID, "the idempotency key must be 1..255 printable ASCII characters", "Idempotency-Key")
        return self.book.keys.get((surface, key))

    def first(self, first: Any, saved: int, what: str) -> None:
        if type(first) is not int or first != saved:
            raise _no(Reason.OUT_OF_ORDER, f"{what} from {first!r:.20}, but {saved} are saved", "first")


def _create_response(c: _Ctx, cmd: CreateResponse) -> Accepted:
    if not is_response_id(cmd.response_id):
        raise _no(Reason.INVALID, "'id' must be a response id (resp_ + 24..64 hex)", "id")
    if cmd.previous_response_id is not None and cmd.conversation is not None:
        raise _no(Reason.INVALID, "'conversation' and 'previous_response_id' cannot be used together", "conversation")
    if cmd.response_id in c.book.responses:
        raise _no(Reason.EXISTS, f"response {cmd.response_id} exists", "id")
    if cmd.previous_response_id is not None:
        previous = c.response(cmd.previous_response_id, "previous_response_id")
        if previous.finished is None:
            raise _no(Reason.PENDING, f"previous response {cmd.previous_response_id} is {previous.status.wire}",
                      "previous_response_id")
    if cmd.conversation is not None:
        c.conversation(cmd.conversation, "conversation")
    if not isinstance(cmd.model, str) or type(cmd.created_at) is not int or cmd.created_at < 0:
        raise _no(Reason.INVALID, "'model' must be a string and 'created_at' a time", "model")
    ids, items = c.items(cmd.input, "input")
    event = ResponseCreated(c.identity, cmd.response_id, cmd.created_at, cmd.model, bool(cmd.background),
                            cmd.previous_response_id or "", cmd.conversation or "", ids, items,
                            c.json(cmd.instructions, "instructions"), c.json(list(cmd.tools), "tools"),
                            c.json(cmd.params, "params", dict), c.json(cmd.metadata, "metadata", dict))
    c.room("responses", extra=len(cmd.model))
    return Accepted((event,))


def _append_events(c: _Ctx, cmd: AppendResponseEvents) -> Accepted:
    record = c.response(cmd.response_id, open_=True)
    c.first(cmd.first, len(record.events), "events")
    events = c.blobs(cmd.events, "events")
    c.room("responses", 0)
    return Accepted((ResponseEventsAppended(c.identity, cmd.response_id, cmd.first, events),) if events else ())


def _cancel(c: _Ctx, cmd: CancelResponse) -> Accepted:
    record = c.response(cmd.response_id, open_=True)
    if record.cancel_requested:
        return Accepted(())
    return Accepted((ResponseCancelRequested(c.identity, cmd.response_id, c.now),))


def _finish(c: _Ctx, cmd: FinishResponse) -> Accepted:
    record = c.response(cmd.response_id, open_=True)
    if not isinstance(cmd.status, ResponseStatus) or not cmd.status.terminal:
        raise _no(Reason.INVALID, "a response finishes completed, incomplete, failed or cancelled", "status")
    ids, output = c.items(cmd.output, "output", record.created.input_ids)
    conversation = live_conversation(c.book, record.created.conversation) if record.created.conversation else None
    if conversation is not None and cmd.status in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
        clash = set(record.created.input_ids + ids).intersection(conversation.item_ids)
        if clash:
            raise _no(Reason.EXISTS, f"item {sorted(clash)[0]} is already in conversation {conversation.id}", "output")
    at = c.now if cmd.finished_at is None else cmd.finished_at
    if type(at) is not int or at < 0:
        raise _no(Reason.INVALID, "'finished_at' must be a time", "finished_at")
    return Accepted((ResponseFinished(c.identity, cmd.response_id, cmd.status, at, ids, output,
                                      c.json(cmd.usage, "usage"), c.json(cmd.error, "error"),
                                      c.json(cmd.incomplete_details, "incomplete_details")),))


def _delete_response(c: _Ctx, cmd: DeleteResponse) -> Accepted:
    c.response(cmd.response_id)
    return Accepted((ResponseDeleted(c.identity, cmd.response_id),))


def _create_conversation(c: _Ctx, cmd: CreateConversation) -> Accepted:
    if not is_conversation_id(cmd.conversation_id):
        raise _no(Reason.INVALID, "'id' must be a conversation id (conv_ + 24..64 hex)", "id")
    if cmd.conversation_id in c.book.conversations:
        raise _no(Reason.EXISTS, f"conversation {cmd.conversation_id} exists", "id")
    if type(cmd.created_at) is not int or cmd.created_at < 0:
        raise _no(Reason.INVALID, "'created_at' must be a time", "created_at")
    if len(cmd.items) > c.limits.items_per_conversation:
        raise _no(Reason.FULL, f"a conversation holds at most {c.limits.items_per_conversation} items", "items")
    metadata = c.json(cmd.metadata, "metadata", dict)
    ids, items = c.items(cmd.items, "items")
    c.room("conversations")
    return Accepted((ConversationCreated(c.identity, cmd.conversation_id, cmd.created_at, metadata, ids, items),))


def _add_items(c: _Ctx, cmd: AddConversationItems) -> Accepted:
    record = c.conversation(cmd.conversation_id)
    if len(record.item_ids) + len(cmd.items) > c.limits.items_per_conversation:
        raise _no(Reason.FULL, f"a conversation holds at most {c.limits.items_per_conversation} items", "items")
    ids, items = c.items(cmd.items, "items", record.item_ids)
    c.room("conversations", 0)
    return Accepted((ConversationItemsAdded(c.identity, cmd.conversation_id, ids, items),) if ids else ())


def _delete_item(c: _Ctx, cmd: DeleteConversationItem) -> Accepted:
    record = c.conversation(cmd.conversation_id)
    if not is_item_id(cmd.item_id) or cmd.item_id not in record.item_ids:
        raise _no(Reason.UNKNOWN, f"no item with id {cmd.item_id!r:.80} in conversation {record.id}", "item_id")
    return Accepted((ConversationItemDeleted(c.identity, cmd.conversation_id, cmd.item_id),))


def _update_conversation(c: _Ctx, cmd: UpdateConversation) -> Accepted:
    record = c.conversation(cmd.conversation_id)
    metadata = c.json(cmd.metadata, "metadata", dict)
    c.room("conversations", 0, extra=-len(record.metadata))
    return Accepted((ConversationMetadataSet(c.identity, cmd.conversation_id, metadata),))


def _delete_conversation(c: _Ctx, cmd: DeleteConversation) -> Accepted:
    c.conversation(cmd.conversation_id)
    return Accepted((ConversationDeleted(c.identity, cmd.conversation_id),))


def _begin_key(c: _Ctx, cmd: BeginKey) -> Accepted:
    record = c.key(cmd.surface, cmd.key)
    if not isinstance(cmd.digest, bytes) or len(cmd.digest) != 32:
        raise _no(Reason.INVALID, "the body digest must be 32 bytes (sha256)", "digest")
    if cmd.bound is not None and not is_response_id(cmd.bound):
        raise _no(Reason.INVALID, "'bound' must be a response id", "bound")
    events: tuple[StoredEvent, ...] = ()
    if record is not None:
        found = key_lookup(c.book, cmd.surface, cmd.key, cmd.digest, c.now, c.limits)
        if found.state is KeyState.MISMATCH:
            raise _no(Reason.MISMATCH, "this Idempotency-Key was used with another request body", "Idempotency-Key")
        if found.state is not KeyState.ABSENT:
            return Accepted((), found)
        events = (StoredExpired(c.identity, (), (cmd.surface,), (cmd.key,), c.now),)
    started = KeyStarted(c.identity, cmd.surface, cmd.key, cmd.digest, c.now, cmd.bound or "")
    c.room("keys", 1 if record is None else 0)
    return Accepted(events + (started,), KeyLookup(KeyState.STARTED, cmd.bound or "", started_at=c.now))


def _open_key(c: _Ctx, surface: Any, key: Any):
    record = c.key(surface, key)
    if record is None:
        raise _no(Reason.UNKNOWN, "no first attempt with this Idempotency-Key", "Idempotency-Key")
    if record.finished is not None:
        raise _no(Reason.FINISHED, "the first attempt with this Idempotency-Key is finished", "Idempotency-Key")
    return record


def _append_answer(c: _Ctx, cmd: AppendKeyAnswer) -> Accepted:
    record = _open_key(c, cmd.surface, cmd.key)
    c.first(cmd.first, len(record.chunks), "chunks")
    chunks = c.blobs(cmd.chunks, "chunks")
    c.room("keys", 0)
    return Accepted((KeyAnswered(c.identity, cmd.surface, cmd.key, cmd.first, chunks),) if chunks else ())


def _finish_key(c: _Ctx, cmd: FinishKey) -> Accepted:
    _open_key(c, cmd.surface, cmd.key)
    if type(cmd.status) is not int or not 100 <= cmd.status <= 599 or not isinstance(cmd.end, KeyEnd):
        raise _no(Reason.INVALID, "a key finishes with an HTTP status and how it ended", "status")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in dict(cmd.headers).items()):
        raise _no(Reason.INVALID, "headers are strings", "headers")
    headers = c.json(dict(cmd.headers), "headers", dict)
    return Accepted((KeyFinished(c.identity, cmd.surface, cmd.key, cmd.end, cmd.status, headers),))


def _expire(c: _Ctx, cmd: Expire) -> Accepted:
    limits, now = c.limits, c.now
    responses = [rid for rid, r in c.book.responses.items()
                 if r.finished is not None and limits.response_expired(r.created.created_at, now)][:EXPIRE_BATCH]
    keys = [sk for sk, k in c.book.keys.items()
            if k.finished is not None and limits.key_expired(k.started.started_at, now)][:EXPIRE_BATCH]
    if not responses and not keys:
        return Accepted(())
    return Accepted((StoredExpired(c.identity, tuple(responses), tuple(s for s, _ in keys),
                                   tuple(k for _, k in keys), now),))


_DECIDE: dict[type, Callable[[_Ctx, Any], Accepted]] = {
    CreateResponse: _create_response, AppendResponseEvents: _append_events, CancelResponse: _cancel,
    FinishResponse: _finish, DeleteResponse: _delete_response, CreateConversation: _create_conversation,
    AddConversationItems: _add_items, DeleteConversationItem: _delete_item,
    UpdateConversation: _update_conversation, DeleteConversation: _delete_conversation, BeginKey: _begin_key,
    AppendKeyAnswer: _append_answer, FinishKey: _finish_key, Expire: _expire}


def decide(state: StoredState, identity: str, command: StoredCommand, now: int, limits: StoredLimits) -> Decision:
    """The events that record `command` for `identity` at time `now` (Unix seconds), or the refusal."""
    if not is_identity(identity):
        return refuse(Reason.INVALID, "stored records need an identity (1..256 printable characters)")
    handler = _DECIDE.get(type(command))
    if handler is None:
        return refuse(Reason.INVALID, f"{type(command).__name__} is not a stored command")
    try:
        return handler(_Ctx(state, identity, int(now), limits), command)
    except _Refused as refused:
        return refused.refusal
