"""Memory metadata rows: exactly 128 bytes, little-endian, pinned layout; JSON on read.

| offset | size | field |
|---:|---:|---|
| 0 | 16 | object (16-byte object ID) |
| 16 | 8 | version (u64, ≥ 1) |
| 24 | 2 | kind (u16: 1 text, 2 source, 3 embedding, 4 interpretation) |
| 26 | 2 | scope (u16: 1 private, 2 room, 3 instance) |
| 28 | 4 | byte length of the payload (u32) |
| 32 | 32 | owner: the owning space ID (lineage ‖ id) |
| 64 | 32 | room: the room's exact space ID for room scope, zero otherwise |
| 96 | 16 | source: object ID of the source object, zero = none |
| 112 | 16 | actor: lineage of the participant that wrote it |

JSON: object and source as 32 hex (source null when zero), owner and room as `spc-` IDs
(room null when zero), actor as 32-hex lineage, counters as decimal strings.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import IdError, MemoryRowError
from .ids import IdKind, format_id, parse_hex16, parse_id
from .vocab import Scope

ROW = struct.Struct("<16sQHHI32s32s16s16s")
ROW_SIZE = 128
MEMORY_ROW_DTYPE = np.dtype({
    "names": ["object", "version", "kind", "scope", "byte_length", "owner", "room", "source", "actor"],
    "formats": [("u1", (16,)), "<u8", "<u2", "<u2", "<u4", ("u1", (32,)), ("u1", (32,)), ("u1", (16,)),
                ("u1", (16,))],
    "offsets": [0, 16, 24, 26, 28, 32, 64, 96, 112], "itemsize": ROW_SIZE,
})
assert ROW.size == ROW_SIZE == MEMORY_ROW_DTYPE.itemsize


class MemoryKind(enum.IntEnum):
    TEXT = 1
    SOURCE = 2
    EMBEDDING = 3
    INTERPRETATION = 4


@dataclass(frozen=True)
class MemoryRow:
    object: bytes
    version: int
    kind: MemoryKind
    scope: Scope
    byte_length: int
    owner: bytes      # 32: space lineage ‖ id
    room: bytes       # 32 or zero
    source: bytes     # 16 or zero
    actor: bytes      # 16


def _check(row: MemoryRow) -> None:
    for name, size in (("object", 16), ("owner", 32), ("room", 32), ("source", 16), ("actor", 16)):
        if not isinstance(getattr(row, name), bytes) or len(getattr(row, name)) != size:
            raise MemoryRowError(f"{name} must be {size} bytes")
    if row.object == bytes(16):
        raise MemoryRowError("object must be nonzero")
    if not 1 <= row.version < 1 << 64:
        raise MemoryRowError(f"version {row.version} is outside 1..2^64-1")
    if not 0 <= row.byte_length < 1 << 32:
        raise MemoryRowError(f"byte length {row.byte_length} does not fit u32")
    try:
        MemoryKind(row.kind), Scope(row.scope)
    except ValueError as exc:
        raise MemoryRowError(str(exc)) from None
    if row.owner == bytes(32):
        raise MemoryRowError("owner must be a space ID")
    if (row.scope == Scope.ROOM) != (row.room != bytes(32)):
        raise MemoryRowError("room must be the space ID for room scope and zero otherwise")
    if row.scope == Scope.ROOM and row.room != row.owner:
        raise MemoryRowError("a room-scoped row's room must be its owning space's exact ID")


def encode_memory_row(row: MemoryRow) -> bytes:
    _check(row)
    return ROW.pack(row.object, row.version, int(row.kind), int(row.scope), row.byte_length, row.owner,
                    row.room, row.source, row.actor)


def decode_memory_row(data: bytes) -> MemoryRow:
    if len(data) != ROW_SIZE:
        raise MemoryRowError(f"a memory row is {ROW_SIZE} bytes, got {len(data)}")
    obj, version, kind, scope, length, owner, room, source, actor = ROW.unpack(data)
    for name, value, enum_type in (("kind", kind, MemoryKind), ("scope", scope, Scope)):
        if value not in enum_type._value2member_map_:
            raise MemoryRowError(f"unknown {name} {value}")
    row = MemoryRow(obj, version, MemoryKind(kind), Scope(scope), length, owner, room, source, actor)
    _check(row)
    return row


def _space_id(raw32: bytes) -> str:
    return format_id(IdKind.SPACE, raw32[:16], raw32[16:])


def memory_row_json(row: MemoryRow) -> dict[str, Any]:
    return {
        "object": row.object.hex(), "version": str(row.version), "kind": MemoryKind(row.kind).name.lower(),
        "scope": Scope(row.scope).label, "owner": _space_id(row.owner),
        "room": None if row.room == bytes(32) else _space_id(row.room),
        "byte_length": str(row.byte_length),
        "source": None if row.source == bytes(16) else row.source.hex(), "actor": row.actor.hex(),
    }


def memory_row_from_json(doc: dict[str, Any]) -> MemoryRow:
    """The inverse of memory_row_json; MemoryRowError names the bad field."""
    want = {"object", "version", "kind", "scope", "owner", "room", "byte_length", "source", "actor"}
    if not isinstance(doc, dict) or set(doc) != want:
        raise MemoryRowError(f"a memory row JSON object has exactly the fields {sorted(want)}")
    try:
        kinds = {k.name.lower(): k for k in MemoryKind}
        if doc["kind"] not in kinds:
            raise MemoryRowError(f"unknown kind {doc['kind']!r}")
        scope = Scope.from_label(doc["scope"]) if isinstance(doc["scope"], str) else None
        counters = []
        for name in ("version", "byte_length"):
            text = doc[name]
            ascii_digits = isinstance(text, str) and text.isascii() and text.isdigit()
            if not ascii_digits or (len(text) > 1 and text[0] == "0"):
                raise MemoryRowError(f"{name} must be a canonical decimal string")
            counters.append(int(text))

        def space(value: Any) -> bytes:
            rid = parse_id(value, IdKind.SPACE)
            return rid.lineage + rid.ident

        row = MemoryRow(
            parse_hex16(doc["object"], "object"), counters[0], kinds[doc["kind"]], scope, counters[1],
            space(doc["owner"]), bytes(32) if doc["room"] is None else space(doc["room"]),
            bytes(16) if doc["source"] is None else parse_hex16(doc["source"], "source"),
            parse_hex16(doc["actor"], "actor"))
    except (IdError, ValueError) as exc:
        if isinstance(exc, MemoryRowError):
            raise
        raise MemoryRowError(str(exc)) from None
    _check(row)
    return row
