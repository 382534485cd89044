"""State events: what an accepted mutation journals, and `apply` replays (plain data).

Each event is a frozen dataclass with its `KIND` tag; its fields, with their wire types
(aotx.journal.wire), are its whole schema. aotx/state/codec.py registers every kind with its
transfer kind in the one codec registry (aotx.journal.registry), which writes the msgpack body:
keys in this fixed order `kind`, `v` (1), the OpHeader (`lineage`, `sequence`, `operation`,
`operation_key`, `command`), then the event's own fields. Bytes are bin, integers unsigned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..journal.wire import B16, U64
from .vocab import Rights, Scope


@dataclass(frozen=True)
class OpHeader:
    """What every mutation event records about its operation."""

    lineage: B16
    sequence: U64
    operation: B16          # op-{lineage}-{operation}, runtime-assigned
    operation_key: B16      # the caller's key
    command: bytes          # canonical bytes


@dataclass(frozen=True)
class ParticipantRegistered:
    op: OpHeader
    participant: B16        # par-{lineage}-{participant}
    KIND = "participant.registered"


@dataclass(frozen=True)
class ReceiptsRetired:
    op: OpHeader
    retry_floor: U64
    KIND = "receipts.retired"


@dataclass(frozen=True)
class SpaceCreated:
    op: OpHeader
    space: B16              # spc-{op.lineage}-{space}
    scope: Scope
    KIND = "space.created"


@dataclass(frozen=True)
class MemberRightsSet:
    op: OpHeader
    space_lineage: B16
    space: B16
    participant_lineage: B16
    participant: B16
    rights: Rights
    KIND = "member.rights_set"


@dataclass(frozen=True)
class ConversationCreated:
    op: OpHeader
    space_lineage: B16
    space: B16
    conversation: B16       # con-{op.lineage}-{conversation}
    KIND = "conversation.created"


@dataclass(frozen=True)
class InputAdmitted:
    """An input's admission (an ADMISSION transfer): what the runtime accepted, apart from the
    caller's canonical bytes — the model's digest and the effective page limit."""

    op: OpHeader
    conversation_lineage: B16
    conversation: B16
    model_digest: bytes     # sha256 of the accepted model's weights file (32 bytes)
    page_limit: U64         # effective KV page limit of this input
    KIND = "input.admitted"


@dataclass(frozen=True)
class InputCancelled:
    """A cancellation of the same lineage's input `target_sequence` (a synchronous mutation)."""

    op: OpHeader
    conversation_lineage: B16
    conversation: B16
    target_sequence: U64
    KIND = "input.cancelled"


@dataclass(frozen=True)
class MemoryPublicationRecorded:
    """A publication into space `space` (a synchronous mutation). `memory` is the complete
    publication with its provenance: the encoded `aotx.memory` MemoryPublished event, which the
    projector applies to the memory store (this package does not read it)."""

    op: OpHeader
    space_lineage: B16
    space: B16
    memory: bytes
    KIND = "memory.publication"


Event = Union[ParticipantRegistered, ReceiptsRetired, SpaceCreated, MemberRightsSet, ConversationCreated,
              InputAdmitted, InputCancelled, MemoryPublicationRecorded]
