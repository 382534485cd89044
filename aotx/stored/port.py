"""The write port of the stored state: what the standard surfaces (api/) need from the runtime.

`StoredJournal` is implemented in process by `SharedRuntime.stored.journal` (aotx.runtime.stored_local
over aotx.runtime.stored_writes.StoredWrites) and across the split by aotx.runtime.stored_remote.
RemoteStored (each call to the runtime that writes the identity's lineage). In process, a command is decided against the acknowledged state (and the commands before it in
the same round), journalled through the runtime's one writer and group commit (ticks; the hold), and
answered once the projector applied it. Reads (`StoredReads`) answer from the acknowledged projection.
Every call names the identity (aotx.stored.ids) that owns what it reads or writes.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, Sequence, Union

from .commands import StoredCommand
from .outcomes import KeyLookup, StoredOutcome, StoredRefusal
from .queries import ConversationView, Page, ResponseEvents, ResponseView


class StoredReads(Protocol):
    """Reads of the acknowledged stored state, at the runtime's clock (aotx.stored.queries); awaited, so that
    a gateway's port can ask the runtime that writes the identity's lineage (aotx.runtime.stored_remote)."""

    async def response(self, identity: str, response_id: str) -> Union[ResponseView, StoredRefusal]: ...

    async def input_items(self, identity: str, response_id: str, *, after: Optional[str] = None, limit: int = 20,
                          order: str = "desc") -> Union[Page, StoredRefusal]: ...

    async def chain(self, identity: str, previous_response_id: str) -> Union[list[dict], StoredRefusal]: ...

    async def response_events(self, identity: str, response_id: str,
                              after: Optional[int] = None) -> Union[ResponseEvents, StoredRefusal]: ...

    async def conversation(self, identity: str, conversation_id: str) -> Union[ConversationView, StoredRefusal]: ...

    async def conversation_items(self, identity: str, conversation_id: str, *, after: Optional[str] = None,
                                 limit: int = 20, order: str = "desc") -> Union[Page, StoredRefusal]: ...

    async def conversation_item(self, identity: str, conversation_id: str, item_id: str) -> Union[dict, StoredRefusal]: ...

    async def all_conversation_items(self, identity: str, conversation_id: str) -> Union[list[dict], StoredRefusal]: ...

    async def key(self, identity: str, surface: str, key: str, digest: bytes) -> KeyLookup: ...


class StoredJournal(Protocol):
    @property
    def reads(self) -> StoredReads: ...

    async def record(self, identity: str, command: StoredCommand) -> StoredOutcome:
        """Decide, journal and apply one command; Saved once applied, else the refusal (nothing changed;
        Reason.HOLD during a journal hold)."""
        ...

    async def append_events(self, identity: str, response_id: str, first: int,
                            events: Sequence[bytes]) -> StoredOutcome:
        """Generated stream events numbered from `first` (= `record(identity, AppendResponseEvents(...))`);
        the appends of a round share its ticks: one append (fsync) for many streams' events."""
        ...

    async def wait_events(self, identity: str, response_id: str, seen: int, timeout: float) -> None:
        """Return once the response has more than `seen` events saved, or finished (or is gone), or after
        `timeout` seconds; then read `reads.response_events` again."""
        ...

    async def wait_key(self, identity: str, surface: str, key: str, seen: int, timeout: float) -> None:
        """The same for a keyed answer's chunks (a repeat following the first attempt)."""
        ...

    def on_hold(self) -> bool:
        """True while the journal is on hold (a write would answer Reason.HOLD); reads keep working."""
        ...


