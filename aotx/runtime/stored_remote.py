"""RemoteStored: the StoredJournal (aotx.stored.port) of a gateway's standard surfaces, across the split.

Every call goes to the runtime that writes the caller's identity lineage, through RemoteRuntime (its
owner map, `not_owner` re-sends, the queue group where the owner is unknown: docs/SCALE.md §4); the
runtime answers it with its own stored port (aotx.runtime.stored_rpc). Values cross as aotx.stored.wire.

A call the runtimes do not answer is refused as the stored core refuses (nothing changed, or, for a
write that reached a runtime but was not answered, in doubt: the client's retry settles it, as for a
shared command): Reason.UNAVAILABLE (503; a too large one Reason.TOO_LARGE, 413). A wait that fails
returns after a short pause (the caller reads again). `on_hold` is the hold the last answer reported
(a write during a hold is refused 429 by the runtime either way).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional, Sequence

from ..stored import AppendResponseEvents, Reason, StoredCommand, StoredOutcome, StoredRefusal, wire
from .outcome import Outcome
from .stored_rpc import MAX_WAIT

log = logging.getLogger("aotx.runtime.stored_remote")
FAILED_WAIT_PAUSE = 0.5   # seconds a wait that could not be sent pauses before the caller reads again


def _refusal(out: Outcome) -> StoredRefusal:
    err = out.body.get("error") or {}
    message = f"{err.get('type', 'error')}: {err.get('message', 'the runtime refused the stored call')}"
    return StoredRefusal(Reason.TOO_LARGE if out.status == 413 else Reason.UNAVAILABLE, message)


class RemoteReads:
    def __init__(self, port: "RemoteStored") -> None:
        self._port = port

    async def _read(self, name: str, identity: str, *args: Any, **page: Any):
        return await self._port.call(identity, "read", [name, list(args), page])

    async def response(self, identity, response_id):
        return await self._read("response", identity, response_id)

    async def input_items(self, identity, response_id, **page):
        return await self._read("input_items", identity, response_id, **page)

    async def chain(self, identity, previous_response_id):
        return await self._read("chain", identity, previous_response_id)

    async def response_events(self, identity, response_id, after=None):
        return await self._read("response_events", identity, response_id, after)

    async def conversation(self, identity, conversation_id):
        return await self._read("conversation", identity, conversation_id)

    async def conversation_items(self, identity, conversation_id, **page):
        return await self._read("conversation_items", identity, conversation_id, **page)

    async def conversation_item(self, identity, conversation_id, item_id):
        return await self._read("conversation_item", identity, conversation_id, item_id)

    async def all_conversation_items(self, identity, conversation_id):
        return await self._read("all_conversation_items", identity, conversation_id)

    async def key(self, identity, surface, key, digest):
        return await self._read("key", identity, surface, key, digest)


class RemoteStored:
    def __init__(self, remote) -> None:
        self.remote = remote          # aotx.runtime.rpc.RemoteRuntime
        self.reads = RemoteReads(self)
        self._hold = False

    async def call(self, identity: str, call: str, args: Any, *, write: bool = False) -> Any:
        out = await self.remote.stored_call(identity, call, wire.pack(args), write=write)
        if out.status != 200:
            return _refusal(out)
        self._hold = bool(out.body.get("hold"))
        return wire.unpack(out.body["value"])

    async def record(self, identity: str, command: StoredCommand) -> StoredOutcome:
        return await self.call(identity, "record", command, write=True)

    async def append_events(self, identity: str, response_id: str, first: int,
                            events: Sequence[bytes]) -> StoredOutcome:
        return await self.record(identity, AppendResponseEvents(response_id, first, list(events)))

    async def _wait(self, identity: str, call: str, args: list, timeout: float) -> None:
        got: Optional[Any] = await self.call(identity, call, [*args, min(float(timeout), MAX_WAIT)])
        if isinstance(got, StoredRefusal):
            log.info("stored %s of %r not answered (%s); reading again", call, identity, got.message)
            await asyncio.sleep(min(timeout, FAILED_WAIT_PAUSE))

    async def wait_events(self, identity: str, response_id: str, seen: int, timeout: float) -> None:
        await self._wait(identity, "wait_events", [response_id, seen], timeout)

    async def wait_key(self, identity: str, surface: str, key: str, seen: int, timeout: float) -> None:
        await self._wait(identity, "wait_key", [surface, key, seen], timeout)

    def on_hold(self) -> bool:
        return self._hold
