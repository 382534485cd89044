"""Events: frozen dataclasses with a stable msgpack body (journal transfer payload).

Body = msgpack map, keys in this fixed order: `kind` (tag), `v` (encoding version, 1),
`lineage`, `sequence`, `operation`, `operation_key`, `command` (canonical bytes), then the
event's own fields. Bytes are msgpack bin; integers unsigned. `from_body` refuses an unknown
kind or version and any missing, extra or mistyped field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from ..journal.transfer import TransferKind, pack_body, unpack_body
from .errors import EventCodecError
from .vocab import Rights, Scope

VERSION = 1
_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class OpHeader:
    """What every mutation event records about its operation."""

    lineage: bytes          # 16
    sequence: int
    operation: bytes        # 16: op-{lineage}-{operation}, runtime-assigned
    operation_key: bytes    # 16: the caller's key
    command: bytes          # canonical bytes


class _Codec:
    """to_body/from_body/encode on every event class (the module functions do the work)."""

    KIND = ""

    def to_body(self) -> dict[str, Any]:
        return to_body(self)  # type: ignore[arg-type]

    def encode(self) -> bytes:
        return encode_event(self)  # type: ignore[arg-type]

    @property
    def transfer_kind(self) -> int:
        return transfer_kind(self)  # type: ignore[arg-type]

    @classmethod
    def from_body(cls, body: Any) -> "Event":
        event = from_body(body)
        if cls is not _Codec and not isinstance(event, cls):
            raise EventCodecError(f"expected a {cls.KIND} event, got {event.KIND}")
        return event


@dataclass(frozen=True)
class ParticipantRegistered(_Codec):
    op: OpHeader
    participant: bytes      # 16: par-{lineage}-{participant}
    KIND = "participant.registered"


@dataclass(frozen=True)
class ReceiptsRetired(_Codec):
    op: OpHeader
    retry_floor: int
    KIND = "receipts.retired"


@dataclass(frozen=True)
class SpaceCreated(_Codec):
    op: OpHeader
    space: bytes            # 16: spc-{op.lineage}-{space}
    scope: Scope
    KIND = "space.created"


@dataclass(frozen=True)
class MemberRightsSet(_Codec):
    op: OpHeader
    space_lineage: bytes
    space: bytes
    participant_lineage: bytes
    participant: bytes
    rights: Rights
    KIND = "member.rights_set"


@dataclass(frozen=True)
class ConversationCreated(_Codec):
    op: OpHeader
    space_lineage: bytes
    space: bytes
    conversation: bytes     # 16: con-{op.lineage}-{conversation}
    KIND = "conversation.created"


@dataclass(frozen=True)
class InputAdmitted(_Codec):
    """An input's admission (an ADMISSION transfer): what the runtime accepted, apart from the
    caller's canonical bytes — the model's digest and the effective page limit."""

    op: OpHeader
    conversation_lineage: bytes
    conversation: bytes
    model_digest: bytes     # sha256 of the accepted model's weights file (32 bytes)
    page_limit: int         # effective KV page limit of this input
    KIND = "input.admitted"


@dataclass(frozen=True)
class InputCancelled(_Codec):
    """A cancellation of the same lineage's input `target_sequence` (a synchronous mutation)."""

    op: OpHeader
    conversation_lineage: bytes
    conversation: bytes
    target_sequence: int
    KIND = "input.cancelled"


@dataclass(frozen=True)
class MemoryPublicationRecorded(_Codec):
    """A publication into space `space` (a synchronous mutation). `memory` is the complete
    publication with its provenance: the encoded `aotx.memory` MemoryPublished event, which the
    projector applies to the memory store (this package does not read it)."""

    op: OpHeader
    space_lineage: bytes
    space: bytes
    memory: bytes
    KIND = "memory.publication"


Event = Union[ParticipantRegistered, ReceiptsRetired, SpaceCreated, MemberRightsSet, ConversationCreated,
              InputAdmitted, InputCancelled, MemoryPublicationRecorded]
EVENT_TYPES = {cls.KIND: cls for cls in (ParticipantRegistered, ReceiptsRetired, SpaceCreated, MemberRightsSet,
                                          ConversationCreated, InputAdmitted, InputCancelled,
                                          MemoryPublicationRecorded)}
_HEADER = ("lineage", "sequence", "operation", "operation_key", "command")
# per kind: (field, type) with type "b16" (16 bytes), "u64", "scope", "rights"
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    ParticipantRegistered.KIND: (("participant", "b16"),),
    ReceiptsRetired.KIND: (("retry_floor", "u64"),),
    SpaceCreated.KIND: (("space", "b16"), ("scope", "scope")),
    MemberRightsSet.KIND: (("space_lineage", "b16"), ("space", "b16"), ("participant_lineage", "b16"),
                           ("participant", "b16"), ("rights", "rights")),
    ConversationCreated.KIND: (("space_lineage", "b16"), ("space", "b16"), ("conversation", "b16")),
    InputAdmitted.KIND: (("conversation_lineage", "b16"), ("conversation", "b16"), ("model_digest", "bytes"),
                         ("page_limit", "u64")),
    InputCancelled.KIND: (("conversation_lineage", "b16"), ("conversation", "b16"), ("target_sequence", "u64")),
    MemoryPublicationRecorded.KIND: (("space_lineage", "b16"), ("space", "b16"), ("memory", "bytes")),
}


def transfer_kind(event: Event) -> int:
    if isinstance(event, ReceiptsRetired):
        return int(TransferKind.RETIREMENT)
    if isinstance(event, InputAdmitted):
        return int(TransferKind.ADMISSION)
    return int(TransferKind.MUTATION)


def to_body(event: Event) -> dict[str, Any]:
    op = event.op
    body: dict[str, Any] = {"kind": event.KIND, "v": VERSION, "lineage": op.lineage, "sequence": op.sequence,
                            "operation": op.operation, "operation_key": op.operation_key, "command": op.command}
    for name, _ in _FIELDS[event.KIND]:
        value = getattr(event, name)
        body[name] = int(value) if isinstance(value, int) else bytes(value)
    return body


def encode_event(event: Event) -> bytes:
    """The msgpack transfer payload of an event."""
    return pack_body(to_body(event))


def _bad(kind: str, name: str, value: Any, want: str) -> EventCodecError:
    return EventCodecError(f"{kind} field {name!r}: expected {want}, got {value!r:.60}")


def _check(kind: str, name: str, value: Any, typ: str) -> Any:
    if typ in ("b16", "bytes"):
        if not isinstance(value, bytes) or (typ == "b16" and len(value) != 16):
            raise _bad(kind, name, value, "16 bytes" if typ == "b16" else "bytes")
        return value
    if type(value) is not int or not 0 <= value <= _U64:
        raise _bad(kind, name, value, "an unsigned 64-bit integer")
    if typ == "scope":
        try:
            return Scope(value)
        except ValueError:
            raise _bad(kind, name, value, "scope 1, 2 or 3") from None
    if typ == "rights":
        if value & ~int(Rights.ALL):
            raise _bad(kind, name, value, "rights bits within 0..7")
        return Rights(value)
    return value


_HEADER_TYPES = {"lineage": "b16", "sequence": "u64", "operation": "b16", "operation_key": "b16", "command": "bytes"}
_EXPECTED = {kind: frozenset({"kind", "v", *_HEADER, *(name for name, _ in own)}) for kind, own in _FIELDS.items()}


def from_body(body: Any) -> Event:
    if not isinstance(body, dict):
        raise EventCodecError(f"event body must be a map, got {type(body).__name__}")
    kind = body.get("kind")
    if kind not in EVENT_TYPES:
        raise EventCodecError(f"unknown event kind {kind!r}")
    if body.get("v") != VERSION:
        raise EventCodecError(f"{kind}: unknown encoding version {body.get('v')!r} (this reader knows {VERSION})")
    own = _FIELDS[kind]
    expected = _EXPECTED[kind]
    if body.keys() != expected:
        extra, missing = sorted(set(body) - expected), sorted(expected - set(body))
        raise EventCodecError(f"{kind}: " + (f"unknown field {extra[0]!r}" if extra else f"missing field {missing[0]!r}"))
    op = OpHeader(**{name: _check(kind, name, body[name], _HEADER_TYPES[name]) for name in _HEADER})
    return EVENT_TYPES[kind](op, **{name: _check(kind, name, body[name], typ) for name, typ in own})


def decode_event(payload: bytes) -> Event:
    try:
        body = unpack_body(payload)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise EventCodecError(f"event payload is not msgpack: {exc}") from None
    return from_body(body)
