"""The in-process StoredJournal (aotx.stored.port) the surfaces of `aotx serve` use: the runtime's
StoredWrites, its reads awaited as a remote port's are (aotx.runtime.stored_remote), so that the
surfaces read the same way in process and across the split. The reads answer at once from the
acknowledged projection; `StoredWrites.reads` stays the synchronous view for the runtime and tests."""

from __future__ import annotations

from typing import Sequence

from ..stored import StoredCommand, StoredOutcome
from .stored_reads import StoredView


class AwaitedReads:
    """StoredView's reads as coroutines (aotx.stored.port.StoredReads)."""

    def __init__(self, view: StoredView) -> None:
        self._view = view

    async def response(self, identity, response_id):
        return self._view.response(identity, response_id)

    async def input_items(self, identity, response_id, **page):
        return self._view.input_items(identity, response_id, **page)

    async def chain(self, identity, previous_response_id):
        return self._view.chain(identity, previous_response_id)

    async def response_events(self, identity, response_id, after=None):
        return self._view.response_events(identity, response_id, after)

    async def conversation(self, identity, conversation_id):
        return self._view.conversation(identity, conversation_id)

    async def conversation_items(self, identity, conversation_id, **page):
        return self._view.conversation_items(identity, conversation_id, **page)

    async def conversation_item(self, identity, conversation_id, item_id):
        return self._view.conversation_item(identity, conversation_id, item_id)

    async def all_conversation_items(self, identity, conversation_id):
        return self._view.all_conversation_items(identity, conversation_id)

    async def key(self, identity, surface, key, digest):
        return self._view.key(identity, surface, key, digest)


class LocalStored:
    def __init__(self, writes) -> None:
        self._writes = writes
        self.reads = AwaitedReads(writes.reads)

    async def record(self, identity: str, command: StoredCommand) -> StoredOutcome:
        return await self._writes.record(identity, command)

    async def append_events(self, identity: str, response_id: str, first: int,
                            events: Sequence[bytes]) -> StoredOutcome:
        return await self._writes.append_events(identity, response_id, first, events)

    async def wait_events(self, identity: str, response_id: str, seen: int, timeout: float) -> None:
        await self._writes.wait_events(identity, response_id, seen, timeout)

    async def wait_key(self, identity: str, surface: str, key: str, seen: int, timeout: float) -> None:
        await self._writes.wait_key(identity, surface, key, seen, timeout)

    def on_hold(self) -> bool:
        return self._writes.on_hold()
