"""Memory events: what a runtime journals and then applies to a MemoryStore (boot = replay; plain data).

Each event is a frozen dataclass with its `KIND` tag; its fields, with their wire types
(aotx.journal.wire), are its whole schema. aotx/memory/codec.py registers every kind in the one
codec registry (aotx.journal.registry), which writes the msgpack body: keys in this fixed
order `kind`, `v` (1), the MemoryOp (`lineage`, `sequence`, `operation`), then the event's own
fields in declaration order. Bytes are bin, integers unsigned. Each event carries every payload
byte it writes (text, source record, embedding, interpretation), so replay never re-runs a model
and recovery uses the recorded retention mode, whatever the current capability table says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..journal.wire import B16, B32, U64


@dataclass(frozen=True)
class MemoryOp:
    """The operation that writes memory: participant lineage, input sequence, operation id."""

    lineage: B16
    sequence: U64
    operation: B16


@dataclass(frozen=True)
class MemoryRetained:
    """An input retained as memory in its conversation's space: text, source record, embedding (+ mode 2)."""

    op: MemoryOp
    conversation: B32
    space: B32                  # owning space ID
    scope: U64                  # the space's Scope code
    actor: B16                  # the participant whose input this is
    mode: U64                   # recorded retention mode (1 or 2)
    text_object: B16
    source_object: B16
    embedding_object: B16
    interpretation_object: B16  # zero for mode 1
    text: bytes                 # kind 1 payload
    source: bytes               # kind 2 payload (96-byte SourceRecord)
    embedding: bytes            # kind 3 payload (384 f32)
    interpretation: bytes       # kind 4 payload; empty for mode 1
    KIND = "memory.retained"


@dataclass(frozen=True)
class MemoryPublished:
    """A retained text memory, its source and its embedding copied into distinct objects of `destination`.

    The record is the publication's complete provenance: the original objects and the exact
    versions copied, the publisher, the destination, and the copied payload bytes.
    """

    op: MemoryOp
    actor: B16                  # the publisher
    destination: B32
    scope: U64                  # the destination space's Scope code
    origin_text: B16
    origin_text_version: U64    # = the request's source_version
    origin_source: B16
    origin_source_version: U64
    origin_embedding: B16
    origin_embedding_version: U64
    text_object: B16            # the new, distinct objects
    source_object: B16
    embedding_object: B16
    text: bytes
    source: bytes
    embedding: bytes
    KIND = "memory.published"


@dataclass(frozen=True)
class MemoryRevised:
    """A new version of a text memory (and of its embedding). Objects derived from the old version
    (its interpretation) stop being visible: visibility requires current source versions."""

    op: MemoryOp
    actor: B16
    text_object: B16
    text_version: U64           # current + 1
    embedding_object: B16
    embedding_version: U64      # current + 1
    text: bytes
    embedding: bytes
    KIND = "memory.revised"


MemoryEvent = Union[MemoryRetained, MemoryPublished, MemoryRevised]
