"""Stored-state events (plain data): what the standard surfaces journal about responses, conversations and
idempotency keys. Each is one STORED transfer (kind 9) on its identity's lineage subject.

Every event names its `identity` first. JSON values (items, instructions, tools, params, metadata,
usage, error, headers) are the UTF-8 bytes of one JSON value each, written by decide
(aotx.stored.decide: compact, key order kept); stream events and answer chunks are the bytes the
surface sent, kept exactly. `""` stands for "none" in an optional id. Times are Unix seconds.
aotx/stored/codec.py registers every kind in the one codec registry (aotx.journal.registry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Union

from ..journal.wire import B32, U64, Require
from .ids import (ConversationId, Identity, ItemId, ItemIds, Key, Keys, OptConversationId, OptResponseId,
                  ResponseId, ResponseIds, Surface, Surfaces)
from .vocab import KeyEnd, ResponseStatus

Blobs = tuple[bytes, ...]
Terminal = Annotated[ResponseStatus, Require(lambda s: s.terminal, "not a terminal status")]


@dataclass(frozen=True)
class ResponseCreated:
    """A stored response (store: true) is created: everything the request defined it by."""

    identity: Identity
    response: ResponseId
    created_at: U64
    model: str
    background: bool
    previous_response: OptResponseId    # previous_response_id, "" none
    conversation: OptConversationId     # conversation, "" none
    input_ids: ItemIds
    input: Blobs                        # the input items' JSON, in order
    instructions: bytes                 # JSON (null, a string or items); never carried over
    tools: bytes                        # JSON array
    params: bytes                       # JSON object: every other request field that defines it
    metadata: bytes                     # JSON object
    KIND = "stored.response.created"


@dataclass(frozen=True)
class ResponseEventsAppended:
    """Stream events of a response, numbered `first`, `first + 1`, … (a tick of generated events)."""

    identity: Identity
    response: ResponseId
    first: U64
    events: Blobs
    KIND = "stored.response.events"


@dataclass(frozen=True)
class ResponseCancelRequested:
    identity: Identity
    response: ResponseId
    requested_at: U64
    KIND = "stored.response.cancel_requested"


@dataclass(frozen=True)
class ResponseFinished:
    """The terminal result; a completed or incomplete response with a conversation adds its input and
    output items to that conversation (if it still exists)."""

    identity: Identity
    response: ResponseId
    status: Terminal
    finished_at: U64
    output_ids: ItemIds
    output: Blobs
    usage: bytes                        # JSON (null or object)
    error: bytes                        # JSON (null or object)
    incomplete_details: bytes           # JSON (null or object)
    KIND = "stored.response.finished"


@dataclass(frozen=True)
class ResponseDeleted:
    identity: Identity
    response: ResponseId
    KIND = "stored.response.deleted"


@dataclass(frozen=True)
class ConversationCreated:
    identity: Identity
    conversation: ConversationId
    created_at: U64
    metadata: bytes                     # JSON object
    item_ids: ItemIds
    items: Blobs
    KIND = "stored.conversation.created"


@dataclass(frozen=True)
class ConversationItemsAdded:
    identity: Identity
    conversation: ConversationId
    item_ids: ItemIds
    items: Blobs
    KIND = "stored.conversation.items_added"


@dataclass(frozen=True)
class ConversationItemDeleted:
    identity: Identity
    conversation: ConversationId
    item: ItemId
    KIND = "stored.conversation.item_deleted"


@dataclass(frozen=True)
class ConversationMetadataSet:
    identity: Identity
    conversation: ConversationId
    metadata: bytes                     # JSON object
    KIND = "stored.conversation.metadata_set"


@dataclass(frozen=True)
class ConversationDeleted:
    identity: Identity
    conversation: ConversationId
    KIND = "stored.conversation.deleted"


@dataclass(frozen=True)
class KeyStarted:
    """The first request with an idempotency key: its body digest and what its answer is bound to
    (`bound`: the stored response that is the answer, or "" when the answer is saved as chunks here)."""

    identity: Identity
    surface: Surface
    key: Key
    digest: B32                         # sha256 of the request body, as the gateway canonicalised it
    started_at: U64
    bound: OptResponseId
    KIND = "stored.key.started"


@dataclass(frozen=True)
class KeyAnswered:
    """Chunks of a keyed answer, numbered `first`, …: the buffered JSON, or stream events in order."""

    identity: Identity
    surface: Surface
    key: Key
    first: U64
    chunks: Blobs
    KIND = "stored.key.answered"


@dataclass(frozen=True)
class KeyFinished:
    identity: Identity
    surface: Surface
    key: Key
    end: KeyEnd
    status: U64                         # the HTTP status answered
    headers: bytes                      # JSON object of the headers that matter (content type, ids)
    KIND = "stored.key.finished"


@dataclass(frozen=True)
class StoredExpired:
    """Retention: responses and keys past their time are removed (their room is free again)."""

    identity: Identity
    responses: ResponseIds
    key_surfaces: Surfaces
    keys: Keys
    at: U64
    KIND = "stored.expired"


StoredEvent = Union[ResponseCreated, ResponseEventsAppended, ResponseCancelRequested, ResponseFinished,
                    ResponseDeleted, ConversationCreated, ConversationItemsAdded, ConversationItemDeleted,
                    ConversationMetadataSet, ConversationDeleted, KeyStarted, KeyAnswered, KeyFinished,
                    StoredExpired]
EVENT_CLASSES = (ResponseCreated, ResponseEventsAppended, ResponseCancelRequested, ResponseFinished,
                 ResponseDeleted, ConversationCreated, ConversationItemsAdded, ConversationItemDeleted,
                 ConversationMetadataSet, ConversationDeleted, KeyStarted, KeyAnswered, KeyFinished, StoredExpired)
