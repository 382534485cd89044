"""Byte formats of memory payloads: text with media links, source records, embeddings.

Text memory (kind 1) = the input's UTF-8 text followed by one 73-byte link per media row:
`"\n[" + type + ":" + sha256 (64 lowercase hex) + "]"`, type `image` or `audio` (both five
letters). Text plus links fit TEXT_LIMIT = 2048 bytes; at most 8 media rows; text may be
empty only with media. Links are plain text: recall renders them as text, never as media.

Source record (kind 2), 96 bytes little-endian:
  @0 32 conversation (lineage ‖ id)   @32 32 operation (lineage ‖ id)
  @64 u64 input sequence              @72 16 actor lineage
  @88 u32 retention mode (1 or 2)     @92 u32 reserved, zero

Embedding (kind 3) = 384 float32 little-endian (1536 bytes), L2-normalised.
Interpretation (kind 4) = UTF-8 text, 1..TEXT_LIMIT bytes.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from ..state import mutations as _input
from .errors import MemoryPayloadError

TEXT_LIMIT = _input.MAX_INPUT_BYTES
LINK_BYTES = _input.MEDIA_LINK_BYTES
MAX_MEDIA = _input.MAX_MEDIA
MEDIA_TYPES = _input.MEDIA_TYPES
EMBEDDING_DIM = 384
EMBEDDING_BYTES = EMBEDDING_DIM * 4
SOURCE_RECORD = struct.Struct("<32s32sQ16sII")
assert SOURCE_RECORD.size == 96
_LINK = re.compile(b"\n" + _input.MEDIA_CONTROL.pattern.encode("ascii"))


@dataclass(frozen=True)
class MediaRef(_input.MediaRef):
    """An input's media row (aotx.state), checked when built from anything but a parsed input."""

    def __post_init__(self) -> None:
        if self.type not in MEDIA_TYPES:
            raise MemoryPayloadError(f"media type {self.type!r} is not image or audio")
        if not isinstance(self.sha256, str) or not _input.SHA256_HEX.fullmatch(self.sha256):
            raise MemoryPayloadError("media sha256 must be 64 lowercase hex digits")


def media_link(ref: MediaRef) -> bytes:
    link = f"\n[{ref.type}:{ref.sha256}]".encode("ascii")
    assert len(link) == LINK_BYTES
    return link


def compose_text(text: str, media: tuple[MediaRef, ...] | list[MediaRef] = ()) -> bytes:
    """The text memory payload: text bytes + one link per media row, checked against the limits."""
    if not isinstance(text, str):
        raise MemoryPayloadError("text must be a string")
    media = tuple(media)
    if len(media) > MAX_MEDIA:
        raise MemoryPayloadError(f"{len(media)} media rows, at most {MAX_MEDIA}")
    if not text and not media:
        raise MemoryPayloadError("text may be empty only with media")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryPayloadError("text is not valid Unicode (lone surrogate)") from None
    total = len(raw) + LINK_BYTES * len(media)
    if total > TEXT_LIMIT:
        raise MemoryPayloadError(f"text ({len(raw)} bytes) plus {len(media)} media links ({LINK_BYTES} bytes each) "
                                 f"is {total} bytes, over {TEXT_LIMIT}")
    return raw + b"".join(media_link(m) for m in media)


def check_text_payload(payload: bytes, what: str = "text") -> str:
    """A kind-1/kind-4 payload: 1..TEXT_LIMIT bytes of UTF-8. Returns the decoded text."""
    if not isinstance(payload, bytes) or not 1 <= len(payload) <= TEXT_LIMIT:
        raise MemoryPayloadError(f"{what} payload must be 1..{TEXT_LIMIT} bytes")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise MemoryPayloadError(f"{what} payload is not valid UTF-8") from None


def embedding_text(payload: bytes) -> str:
    """What the embedding model reads for a text memory: its text with the media links left out."""
    check_text_payload(payload)
    return _LINK.sub(b"", payload).decode("utf-8")


def embedding_bytes(vector: np.ndarray) -> bytes:
    v = np.asarray(vector)
    if v.shape != (EMBEDDING_DIM,) or not np.all(np.isfinite(v)):
        raise MemoryPayloadError(f"an embedding is {EMBEDDING_DIM} finite numbers, got shape {v.shape}")
    return v.astype("<f4").tobytes()


def embedding_from_bytes(payload: bytes) -> np.ndarray:
    if not isinstance(payload, bytes) or len(payload) != EMBEDDING_BYTES:
        raise MemoryPayloadError(f"an embedding payload is {EMBEDDING_BYTES} bytes")
    v = np.frombuffer(payload, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(v)):
        raise MemoryPayloadError("an embedding payload holds a non-finite number")
    return v


@dataclass(frozen=True)
class SourceRecord:
    conversation: bytes   # 32
    operation: bytes      # 32: lineage ‖ operation
    sequence: int
    actor: bytes          # 16
    mode: int             # recorded retention mode

    def encode(self) -> bytes:
        for name, size in (("conversation", 32), ("operation", 32), ("actor", 16)):
            if not isinstance(getattr(self, name), bytes) or len(getattr(self, name)) != size:
                raise MemoryPayloadError(f"source record {name} must be {size} bytes")
        if not 0 <= self.sequence < 1 << 64:
            raise MemoryPayloadError("source record sequence does not fit u64")
        if self.mode not in (1, 2):
            raise MemoryPayloadError(f"retention mode {self.mode} is not 1 or 2")
        return SOURCE_RECORD.pack(self.conversation, self.operation, self.sequence, self.actor, self.mode, 0)

    @classmethod
    def decode(cls, data: bytes) -> "SourceRecord":
        if not isinstance(data, bytes) or len(data) != SOURCE_RECORD.size:
            raise MemoryPayloadError(f"a source record is {SOURCE_RECORD.size} bytes")
        conversation, operation, sequence, actor, mode, reserved = SOURCE_RECORD.unpack(data)
        if reserved:
            raise MemoryPayloadError("source record reserved word must be zero")
        record = cls(conversation, operation, sequence, actor, mode)
        record.encode()
        return record

    def label(self) -> str:
        """The source label recall renders: who said it, in which conversation (short hex)."""
        return f"participant {self.actor[:4].hex()} in conversation {self.conversation[16:20].hex()}"
