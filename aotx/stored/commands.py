"""Stored commands: what a surface asks the stored core to record, for one identity (`record(identity, cmd)`).

JSON values are Python JSON values (dict / list / str / int / float / bool / None) — decide writes
them as compact JSON, key order kept; items are JSON objects whose `"id"` is their item id. Stream
events and answer chunks are bytes, kept exactly as the surface sent them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

from .vocab import KeyEnd, ResponseStatus

JsonObject = Mapping[str, Any]


@dataclass(frozen=True)
class CreateResponse:
    """Store a new response (store: true). Refused: the id exists; previous_response_id or conversation
    unknown (or the previous one unfinished); both given; limits."""

    response_id: str
    created_at: int
    model: str
    input: Sequence[JsonObject]                 # input items, each with its "id"
    instructions: Any = None
    tools: Sequence[Any] = ()
    params: JsonObject = field(default_factory=dict)
    metadata: JsonObject = field(default_factory=dict)
    previous_response_id: Optional[str] = None
    conversation: Optional[str] = None
    background: bool = False


@dataclass(frozen=True)
class AppendResponseEvents:
    """Stream events numbered `first`, `first + 1`, … (first must be the count saved so far)."""

    response_id: str
    first: int
    events: Sequence[bytes]


@dataclass(frozen=True)
class CancelResponse:
    response_id: str


@dataclass(frozen=True)
class FinishResponse:
    """The terminal result. Never refused for room (what it ends was admitted already)."""

    response_id: str
    status: ResponseStatus                      # completed, incomplete, failed or cancelled
    output: Sequence[JsonObject] = ()           # output items, each with its "id"
    usage: Any = None
    error: Any = None
    incomplete_details: Any = None
    finished_at: Optional[int] = None           # default: the round's clock


@dataclass(frozen=True)
class DeleteResponse:
    response_id: str


@dataclass(frozen=True)
class CreateConversation:
    conversation_id: str
    created_at: int
    metadata: JsonObject = field(default_factory=dict)
    items: Sequence[JsonObject] = ()


@dataclass(frozen=True)
class AddConversationItems:
    conversation_id: str
    items: Sequence[JsonObject]


@dataclass(frozen=True)
class DeleteConversationItem:
    conversation_id: str
    item_id: str


@dataclass(frozen=True)
class UpdateConversation:
    conversation_id: str
    metadata: JsonObject


@dataclass(frozen=True)
class DeleteConversation:
    conversation_id: str


@dataclass(frozen=True)
class BeginKey:
    """The first step of a request with an Idempotency-Key. Answered with the key's state: STARTED (run
    it), RUNNING (follow the first attempt), FINISHED (replay its answer); MISMATCH is a refusal (422).
    `bound`: the stored response id that will be the answer, or None (the answer is saved as chunks)."""

    surface: str
    key: str
    digest: bytes                               # sha256 (32 bytes) of the canonical request body
    bound: Optional[str] = None


@dataclass(frozen=True)
class AppendKeyAnswer:
    surface: str
    key: str
    first: int
    chunks: Sequence[bytes]


@dataclass(frozen=True)
class FinishKey:
    surface: str
    key: str
    status: int                                 # the HTTP status answered
    headers: Mapping[str, str] = field(default_factory=dict)
    end: KeyEnd = KeyEnd.COMPLETE


@dataclass(frozen=True)
class Expire:
    """Retention (the runtime's sweep): journal the expiry of this identity's records past their time."""


StoredCommand = Union[CreateResponse, AppendResponseEvents, CancelResponse, FinishResponse, DeleteResponse,
                      CreateConversation, AddConversationItems, DeleteConversationItem, UpdateConversation,
                      DeleteConversation, BeginKey, AppendKeyAnswer, FinishKey, Expire]
