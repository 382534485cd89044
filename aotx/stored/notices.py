"""What a live reader needs to hear of applied stored events: "response R of identity I has N events
(finished or not)", "key K has N chunks", "conversation C changed". Pure: the notices of the STORED
transfers of one applied journal message (an aotx.runtime.observers.Applied's `transfers`).

A broker of SSE readers registers one observer and routes each notice to the readers of
(identity, topic, ref) — never to another identity's; aotx.runtime.stored_signals is the simple
in-process one (`wait_events`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Optional

from ..journal import Transfer, TransferKind
from .codec import stored_from_body
from .errors import StoredCodecError
from .events import (ConversationCreated, ConversationDeleted, ConversationItemDeleted, ConversationItemsAdded,
                     ConversationMetadataSet, KeyAnswered, KeyFinished, KeyStarted, ResponseCancelRequested,
                     ResponseCreated, ResponseDeleted, ResponseEventsAppended, ResponseFinished, StoredExpired)

Topic = Literal["response", "key", "conversation"]


@dataclass(frozen=True)
class StoredNotice:
    """`ref`: the response id, the conversation id, or (surface, key). `count`: events (chunks) saved
    after this message, where the event tells it (None otherwise); `finished`: no more will come
    (finished, deleted, expired); `cancel`: a cancellation was requested."""

    identity: str
    topic: Topic
    ref: str | tuple[str, str]
    count: Optional[int] = None
    finished: bool = False
    cancel: bool = False


def notices(transfers: Iterable[Transfer]) -> list[StoredNotice]:
    out: list[StoredNotice] = []
    for t in transfers:
        if t.kind != TransferKind.STORED:
            continue
        try:
            e = t.event if t.event is not None else stored_from_body(t.body)   # the writer's own: as decided
        except StoredCodecError:   # the projector applied it, so it decodes; a notice is never worth a failure
            continue
        out += _of(e)
    return out


def _of(e) -> list[StoredNotice]:
    i = e.identity
    if isinstance(e, ResponseCreated):
        return [StoredNotice(i, "response", e.response, 0)]
    if isinstance(e, ResponseEventsAppended):
        return [StoredNotice(i, "response", e.response, e.first + len(e.events))]
    if isinstance(e, ResponseCancelRequested):
        return [StoredNotice(i, "response", e.response, cancel=True)]
    if isinstance(e, (ResponseFinished, ResponseDeleted)):
        return [StoredNotice(i, "response", e.response, finished=True)]
    if isinstance(e, (ConversationCreated, ConversationItemsAdded, ConversationItemDeleted, ConversationMetadataSet)):
        return [StoredNotice(i, "conversation", e.conversation)]
    if isinstance(e, ConversationDeleted):
        return [StoredNotice(i, "conversation", e.conversation, finished=True)]
    if isinstance(e, KeyStarted):
        return [StoredNotice(i, "key", (e.surface, e.key), 0)]
    if isinstance(e, KeyAnswered):
        return [StoredNotice(i, "key", (e.surface, e.key), e.first + len(e.chunks))]
    if isinstance(e, KeyFinished):
        return [StoredNotice(i, "key", (e.surface, e.key), finished=True)]
    if isinstance(e, StoredExpired):
        return [StoredNotice(i, "response", r, finished=True) for r in e.responses] + \
               [StoredNotice(i, "key", (s, k), finished=True) for s, k in zip(e.key_surfaces, e.keys)]
    return []
