"""The state core's kinds in the one codec registry (aotx.journal.registry): kind → class → transfer kind.

Two families: state events (aotx/state/events.py; EventCodecError) and execution events
(aotx/state/execution_events.py; EventCodecError). The functions below are the names callers
have always used; each is one call into the registry.
"""

from __future__ import annotations

from typing import Any

from ..journal.registry import REGISTRY, Family
from ..journal.transfer import TransferKind
from .errors import EventCodecError
from .events import (ConversationCreated, Event, InputAdmitted, InputCancelled, MemberRightsSet,
                     MemoryPublicationRecorded, ParticipantRegistered, ReceiptsRetired, SpaceCreated)
from .execution_events import ExecutionEvent, InputCompleted, LeaseApplied, OutputAppended

STATE = Family("event", EventCodecError)
EXECUTION = Family("execution event", EventCodecError)

for _cls, _family, _transfer in (
    (ParticipantRegistered, STATE, TransferKind.MUTATION),
    (ReceiptsRetired, STATE, TransferKind.RETIREMENT),
    (SpaceCreated, STATE, TransferKind.MUTATION),
    (MemberRightsSet, STATE, TransferKind.MUTATION),
    (ConversationCreated, STATE, TransferKind.MUTATION),
    (InputAdmitted, STATE, TransferKind.ADMISSION),
    (InputCancelled, STATE, TransferKind.MUTATION),
    (MemoryPublicationRecorded, STATE, TransferKind.MUTATION),
    (LeaseApplied, EXECUTION, TransferKind.LEASE),
    (OutputAppended, EXECUTION, TransferKind.OUTPUT),
    (InputCompleted, EXECUTION, TransferKind.COMPLETION),
):
    REGISTRY.register(_cls, _family, _transfer)

# the reassembler decodes state transfers' payloads straight into their events (Transfer.event); a member-rights
# change, the commonest, into its checked Struct (Transfer.wire), which the projector applies as it is
# (aotx.state.member_wire): its event is built only where something reads it
REGISTRY.decode_on_read(TransferKind.MUTATION, TransferKind.RETIREMENT, TransferKind.ADMISSION,
                        deferred=(MemberRightsSet,))

# execution event class → its transfer kind (the runtime's lookup)
TRANSFER_KIND = {k.cls: TransferKind(k.transfer) for k in REGISTRY.kinds(EXECUTION)}


def transfer_kind(event: Event) -> int:
    return int(REGISTRY.transfer_kind(event))


def to_body(event: Event) -> dict[str, Any]:
    return REGISTRY.body(event)


def encode_event(event: Event) -> bytes:
    """The msgpack transfer payload of an event."""
    return REGISTRY.encode(event)


def from_body(body: Any) -> Event:
    """A state event from its unpacked body; EventCodecError refuses anything else."""
    return REGISTRY.decode_body(body, STATE)


def decode_event(payload: bytes) -> Event:
    return REGISTRY.decode(payload, STATE)


def execution_body(event: ExecutionEvent) -> dict[str, Any]:
    return REGISTRY.body(event)


def execution_from_body(transfer_kind: int, body: Any) -> ExecutionEvent:
    """Decode an execution transfer body of that transfer kind; anything else refuses (EventCodecError)."""
    return REGISTRY.decode_body(body, EXECUTION, transfer_kind)
