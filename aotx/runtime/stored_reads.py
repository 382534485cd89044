"""StoredReads over the acknowledged projection: the stored state the writer's projector holds, read at
the runtime's clock with its limits (aotx.stored.queries; the reads of `SharedRuntime.stored`)."""

from __future__ import annotations

from typing import Callable, Optional

from ..projection import Projector
from ..stored import StoredLimits, StoredState, queries
from ..stored.queries import live_response


class StoredView:
    def __init__(self, projector: Callable[[], Projector | None], limits: StoredLimits,
                 clock: Callable[[], float]) -> None:
        self._projector, self.limits, self._clock = projector, limits, clock

    @property
    def state(self) -> StoredState:
        proj = self._projector()
        if proj is None:
            raise RuntimeError("shared runtime not started")
        return proj.stored

    def now(self) -> int:
        return int(self._clock())

    def response(self, identity: str, response_id: str):
        return queries.response(self.state, identity, response_id, self.now(), self.limits)

    def input_items(self, identity: str, response_id: str, *, after: Optional[str] = None, limit: int = 20,
                    order: str = "desc"):
        return queries.input_items(self.state, identity, response_id, self.now(), self.limits, after=after,
                                   limit=limit, order=order)

    def chain(self, identity: str, previous_response_id: str):
        return queries.chain(self.state, identity, previous_response_id, self.now(), self.limits)

    def response_events(self, identity: str, response_id: str, after: Optional[int] = None):
        return queries.response_events(self.state, identity, response_id, self.now(), self.limits, after)

    def conversation(self, identity: str, conversation_id: str):
        return queries.conversation(self.state, identity, conversation_id)

    def conversation_items(self, identity: str, conversation_id: str, *, after: Optional[str] = None,
                           limit: int = 20, order: str = "desc"):
        return queries.conversation_items(self.state, identity, conversation_id, after=after, limit=limit,
                                          order=order)

    def conversation_item(self, identity: str, conversation_id: str, item_id: str):
        return queries.conversation_item(self.state, identity, conversation_id, item_id)

    def all_conversation_items(self, identity: str, conversation_id: str):
        return queries.all_conversation_items(self.state, identity, conversation_id)

    def key(self, identity: str, surface: str, key: str, digest: bytes):
        return queries.key(self.state, identity, surface, key, digest, self.now(), self.limits)

    # what a waiting reader checks (no parsing)
    def events_ready(self, identity: str, response_id: str, seen: int) -> bool:
        """The response has more than `seen` events saved, or has finished, or is not there."""
        r = live_response(self.state.book(identity), response_id, self.now(), self.limits)
        return r is None or r.finished is not None or len(r.events) > seen

    def chunks_ready(self, identity: str, surface: str, key: str, seen: int) -> bool:
        k = self.state.book(identity).keys.get((surface, key))
        return k is None or k.finished is not None or len(k.chunks) > seen
