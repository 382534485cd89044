"""The snapshot byte format: a versioned, checksummed header, then the body (aotx.snapshot.body).

Header, format version 1 (little-endian; pinned by golden bytes in tests/snapshot):

| offset | size | field |
|---:|---:|---|
| 0 | 8 | magic `AOTXSNAP` |
| 8 | 2 | u16 format version (1) |
| 10 | 2 | u16 header length H (bytes 0..H, the digest included) |
| 12 | 4 | u32 reserved, zero |
| 16 | 8 | u64 covered: the last stream sequence the snapshot covers (every message ≤ it is applied) |
| 24 | 8 | u64 messages: journal messages the projection applied (covered − messages = sequences before its first) |
| 32 | 28 | 7 × u32 capacities: participants, spaces, conversations, members, receipts, command bytes, result bytes |
| 60 | 4 | u32 reserved, zero |
| 64 | 8 | u64 body length B |
| 72 | 2+S | u16 S, the journal stream's name (UTF-8) |
| 74+S | 2+I | u16 I, the stream's incarnation (its created time, ISO 8601, as receipts name it) |
| H−32 | 32 | BLAKE2b-256 (person `aotx-snapshot`) over bytes 0..H−32 ‖ the body |
| H | B | the body |

The digest covers the header fields too, so a flipped bit anywhere refuses the snapshot. A reader
checks magic, then the version (an unknown one is refused before its layout is read), then the
lengths, then the digest — only then does it believe a field. Old versions decode forever: a new
layout takes a new version number and this module keeps every older reader.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from ..state import Capacities, StateError

MAGIC = b"AOTXSNAP"
VERSION = 1
KNOWN_VERSIONS = (1,)
DIGEST_SIZE = 32
_PERSON = b"aotx-snapshot"
_FIXED = struct.Struct("<8sHHIQQ7IIQ")   # magic … body length: 72 bytes
assert _FIXED.size == 72
_U16 = struct.Struct("<H")


class SnapshotRefused(Exception):
    """A snapshot this runtime must not start from; `reason` is one word, the message says why.

    Reasons: format (not a snapshot, or cut short), version (unknown format version), checksum,
    body (the body does not decode), foreign (another stream or incarnation), capacities (not the
    runtime file's), beyond (covers sequences the stream does not hold), gap (the stream no longer
    holds the messages right after it)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class SnapshotHeader:
    stream: str
    incarnation: str
    covered: int
    messages: int
    capacities: Capacities
    body_length: int
    version: int = VERSION

    @property
    def base(self) -> int:
        """Stream sequences before the projection's first message (0 for a journal never purged)."""
        return self.covered - self.messages


def _digest(head: bytes | memoryview, body: bytes | memoryview) -> bytes:
    h = hashlib.blake2b(digest_size=DIGEST_SIZE, person=_PERSON)
    h.update(head)
    h.update(body)
    return h.digest()


def _text(value: str, what: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError(f"snapshot {what} is over 65535 bytes")
    return _U16.pack(len(raw)) + raw


def pack_snapshot(header: SnapshotHeader, body: bytes) -> bytes:
    """Header (with its digest) ‖ body. `header.body_length` must be len(body)."""
    if header.version != VERSION:
        raise ValueError(f"this writer writes format version {VERSION}, not {header.version}")
    if header.body_length != len(body):
        raise ValueError(f"header body length {header.body_length} is not the body's {len(body)}")
    if not 0 <= header.messages <= header.covered < 1 << 64:
        raise ValueError(f"covered {header.covered} / messages {header.messages} out of range")
    names = _text(header.stream, "stream name") + _text(header.incarnation, "incarnation")
    length = _FIXED.size + len(names) + DIGEST_SIZE
    head = _FIXED.pack(MAGIC, VERSION, length, 0, header.covered, header.messages,
                       *header.capacities.as_tuple(), 0, len(body)) + names
    return head + _digest(head, body) + body


def unpack_snapshot(blob: bytes) -> tuple[SnapshotHeader, memoryview]:
    """The checked header and a view of the body; SnapshotRefused (format, version, checksum) otherwise."""
    view = memoryview(blob)
    if len(view) < 10 or bytes(view[:8]) != MAGIC:
        raise SnapshotRefused("format", "not a snapshot (no AOTXSNAP magic)")
    version = _U16.unpack_from(view, 8)[0]
    if version not in KNOWN_VERSIONS:
        raise SnapshotRefused("version", f"format version {version} is not one this runtime reads {KNOWN_VERSIONS}")
    return _unpack_v1(view)


def _unpack_v1(view: memoryview) -> tuple[SnapshotHeader, memoryview]:
    if len(view) < _FIXED.size:
        raise SnapshotRefused("format", f"{len(view)} bytes cannot hold the {_FIXED.size}-byte header")
    (_, version, length, reserved, covered, messages, *caps, reserved2, body_length) = _FIXED.unpack_from(view, 0)
    if not _FIXED.size + 4 + DIGEST_SIZE <= length <= len(view):
        raise SnapshotRefused("format", f"header length {length} does not fit the {len(view)} bytes")
    if length + body_length != len(view):
        raise SnapshotRefused("format", f"header {length} + body {body_length} bytes, but {len(view)} are stored")
    end = length - DIGEST_SIZE
    if _digest(view[:end], view[length:]) != bytes(view[end:length]):
        raise SnapshotRefused("checksum", "the BLAKE2b-256 of header and body does not match")
    texts, at = [], _FIXED.size
    for what in ("stream name", "incarnation"):
        if at + 2 > end:
            raise SnapshotRefused("format", f"the header ends before the {what}")
        n = _U16.unpack_from(view, at)[0]
        if at + 2 + n > end:
            raise SnapshotRefused("format", f"the {what} runs past the header")
        try:
            texts.append(bytes(view[at + 2:at + 2 + n]).decode("utf-8"))
        except UnicodeDecodeError:
            raise SnapshotRefused("format", f"the {what} is not UTF-8") from None
        at += 2 + n
    if at != end or reserved or reserved2:
        raise SnapshotRefused("format", "unknown header bytes (reserved fields must be zero)")
    if messages > covered:
        raise SnapshotRefused("format", f"{messages} messages cannot fit in sequences 1..{covered}")
    try:
        capacities = Capacities(*caps)
    except StateError as exc:
        raise SnapshotRefused("format", str(exc)) from None
    return SnapshotHeader(texts[0], texts[1], covered, messages, capacities, body_length, version), view[length:]
