"""Memory events: what a runtime journals and then applies to a MemoryStore (boot = replay).

Body = msgpack map (via aotx.journal.transfer.pack_body), keys in this fixed order: `kind`,
`v` (1), `lineage`, `sequence`, `operation`, then the event's own fields in declaration
order. Bytes are msgpack bin, integers unsigned. Unknown kind/version and any missing,
extra or mistyped field raise MemoryCodecError. Each event carries every payload byte it
writes (text, source record, embedding, interpretation), so replay never re-runs a model
and recovery uses the recorded retention mode, whatever the current capability table says.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Union

from ..journal.transfer import pack_body, unpack_body
from .errors import MemoryCodecError

VERSION = 1
_U64 = (1 << 64) - 1
_SIZES = {"b16": 16, "b32": 32}


@dataclass(frozen=True)
class MemoryOp:
    """The operation that writes memory: participant lineage, input sequence, operation id."""

    lineage: bytes      # 16
    sequence: int
    operation: bytes    # 16


@dataclass(frozen=True)
class MemoryRetained:
    """An input retained as memory in its conversation's space: text, source record, embedding (+ mode 2)."""

    op: MemoryOp
    conversation: bytes         # 32
    space: bytes                # 32: owning space ID
    scope: int                  # the space's Scope code
    actor: bytes                # 16: the participant whose input this is
    mode: int                   # recorded retention mode (1 or 2)
    text_object: bytes
    source_object: bytes
    embedding_object: bytes
    interpretation_object: bytes  # zero for mode 1
    text: bytes                 # kind 1 payload
    source: bytes               # kind 2 payload (96-byte SourceRecord)
    embedding: bytes            # kind 3 payload (384 f32)
    interpretation: bytes       # kind 4 payload; empty for mode 1
    KIND = "memory.retained"
    FIELDS = (("conversation", "b32"), ("space", "b32"), ("scope", "u64"), ("actor", "b16"), ("mode", "u64"),
              ("text_object", "b16"), ("source_object", "b16"), ("embedding_object", "b16"),
              ("interpretation_object", "b16"), ("text", "bytes"), ("source", "bytes"), ("embedding", "bytes"),
              ("interpretation", "bytes"))


@dataclass(frozen=True)
class MemoryPublished:
    """A retained text memory, its source and its embedding copied into distinct objects of `destination`.

    The record is the publication's complete provenance: the original objects and the exact
    versions copied, the publisher, the destination, and the copied payload bytes.
    """

    op: MemoryOp
    actor: bytes                # 16: the publisher
    destination: bytes          # 32
    scope: int                  # the destination space's Scope code
    origin_text: bytes
    origin_text_version: int    # = the request's source_version
    origin_source: bytes
    origin_source_version: int
    origin_embedding: bytes
    origin_embedding_version: int
    text_object: bytes          # the new, distinct objects
    source_object: bytes
    embedding_object: bytes
    text: bytes
    source: bytes
    embedding: bytes
    KIND = "memory.published"
    FIELDS = (("actor", "b16"), ("destination", "b32"), ("scope", "u64"), ("origin_text", "b16"),
              ("origin_text_version", "u64"), ("origin_source", "b16"), ("origin_source_version", "u64"),
              ("origin_embedding", "b16"), ("origin_embedding_version", "u64"), ("text_object", "b16"),
              ("source_object", "b16"), ("embedding_object", "b16"), ("text", "bytes"), ("source", "bytes"),
              ("embedding", "bytes"))


@dataclass(frozen=True)
class MemoryRevised:
    """A new version of a text memory (and of its embedding). Objects derived from the old version
    (its interpretation) stop being visible: visibility requires current source versions."""

    op: MemoryOp
    actor: bytes
    text_object: bytes
    text_version: int           # current + 1
    embedding_object: bytes
    embedding_version: int      # current + 1
    text: bytes
    embedding: bytes
    KIND = "memory.revised"
    FIELDS = (("actor", "b16"), ("text_object", "b16"), ("text_version", "u64"), ("embedding_object", "b16"),
              ("embedding_version", "u64"), ("text", "bytes"), ("embedding", "bytes"))


MemoryEvent = Union[MemoryRetained, MemoryPublished, MemoryRevised]
EVENT_TYPES = {cls.KIND: cls for cls in (MemoryRetained, MemoryPublished, MemoryRevised)}
_HEADER = (("lineage", "b16"), ("sequence", "u64"), ("operation", "b16"))


def memory_event_body(event: MemoryEvent) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": event.KIND, "v": VERSION, "lineage": event.op.lineage,
                            "sequence": event.op.sequence, "operation": event.op.operation}
    for name, typ in event.FIELDS:
        _check(event.KIND, name, getattr(event, name), typ)
    for name, _ in _HEADER:
        _check(event.KIND, name, body[name], dict(_HEADER)[name])
    for name, _ in event.FIELDS:
        body[name] = getattr(event, name)
    return body


def encode_memory_event(event: MemoryEvent) -> bytes:
    return pack_body(memory_event_body(event))


def _check(kind: str, name: str, value: Any, typ: str) -> Any:
    if typ == "u64":
        if type(value) is not int or not 0 <= value <= _U64:
            raise MemoryCodecError(f"{kind} field {name!r}: expected an unsigned 64-bit integer, got {value!r:.60}")
    elif not isinstance(value, bytes) or (typ in _SIZES and len(value) != _SIZES[typ]):
        want = f"{_SIZES[typ]} bytes" if typ in _SIZES else "bytes"
        raise MemoryCodecError(f"{kind} field {name!r}: expected {want}, got {value!r:.60}")
    return value


def memory_event_from_body(body: Any) -> MemoryEvent:
    if not isinstance(body, dict):
        raise MemoryCodecError(f"memory event body must be a map, got {type(body).__name__}")
    kind = body.get("kind")
    if kind not in EVENT_TYPES:
        raise MemoryCodecError(f"unknown memory event kind {kind!r}")
    if body.get("v") != VERSION:
        raise MemoryCodecError(f"{kind}: unknown encoding version {body.get('v')!r} (this reader knows {VERSION})")
    cls = EVENT_TYPES[kind]
    expected = ["kind", "v", *(n for n, _ in _HEADER), *(n for n, _ in cls.FIELDS)]
    if set(body) != set(expected):
        extra, missing = sorted(set(body) - set(expected)), sorted(set(expected) - set(body))
        raise MemoryCodecError(f"{kind}: " + (f"unknown field {extra[0]!r}" if extra else f"missing field {missing[0]!r}"))
    op = MemoryOp(*(_check(kind, n, body[n], t) for n, t in _HEADER))
    return cls(op, **{n: _check(kind, n, body[n], t) for n, t in cls.FIELDS})


def decode_memory_event(payload: bytes) -> MemoryEvent:
    try:
        body = unpack_body(payload)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise MemoryCodecError(f"memory event payload is not msgpack: {exc}") from None
    return memory_event_from_body(body)


assert all([f.name for f in fields(cls)][1:] == [n for n, _ in cls.FIELDS] for cls in EVENT_TYPES.values())
