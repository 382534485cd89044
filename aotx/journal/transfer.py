"""Transfers: a msgpack body plus a 16-byte digest, split into type-37 records.

Transfer data = payload || digest, digest = BLAKE2b-128(person=b"aotx-transfer37")
over `<u32 kind, u64 transfer_id, u64 lineage_hash, u32 payload_len>` || payload.
Every part but the last carries exactly 160 bytes; the last carries 1..160.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

import msgpack

from .errors import JournalFormatError
from .crc32c import crc32c_bytes
from .record import HEADER, MAX_BODY, RECORD_CLASS, RECORD_TYPE, Record

_HEADER_PACK = HEADER.pack
_CRC = crc32c_bytes

DIGEST_SIZE = 16
MAX_PARTS = 0xFFFF
MAX_PAYLOAD = MAX_PARTS * MAX_BODY - DIGEST_SIZE
_DIGEST_PERSON = b"aotx-transfer37"
_DIGEST_PREFIX = struct.Struct("<IQQI")


class TransferKind(enum.IntEnum):
    """Known transfer kinds (u32 on the wire; unknown values still round-trip)."""

    MUTATION = 1
    ADMISSION = 2
    LEASE = 3
    OUTPUT = 4
    COMPLETION = 5
    RETIREMENT = 6
    CONTROL = 7
    MEMORY = 8       # retained memory of an input (aotx.memory MemoryRetained)
    STORED = 9       # stored state of the standard surfaces (aotx.stored: responses, conversations, keys)


@functools.lru_cache(maxsize=8192)
def lineage_hash(lineage: str | bytes) -> int:
    """u64 of a lineage: BLAKE2b-64 of its 16 bytes (given as bytes or 32 hex digits), little-endian."""
    raw = bytes.fromhex(lineage) if isinstance(lineage, str) else bytes(lineage)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


_DIGEST_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE, person=_DIGEST_PERSON)   # copied: cheaper than made anew


def transfer_digest(kind: int, transfer_id: int, lineage: int, payload: bytes) -> bytes:
    h = _DIGEST_HASH.copy()
    h.update(_DIGEST_PREFIX.pack(kind, transfer_id, lineage, len(payload)))
    h.update(payload)
    return h.digest()


def pack_body(body: Any) -> bytes:
    return msgpack.packb(body, use_bin_type=True)


def unpack_body(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)


@dataclass(frozen=True)
class Transfer:
    """A complete, verified transfer. `payload` is the msgpack bytes, `body` their value. `event`: where
    the writer built this transfer from an event (its own tick, Emitter.submit_payload), that event —
    what decoding `body` yields — so applying its own acknowledged tick need not decode it again; for a
    transfer read from the log, the event the reassembler's fast path decoded its payload into (a kind
    in aotx.journal.whole.PAYLOAD_DECODERS; then `body` is unpacked only when read), else None. A kind the
    registry defers (`decode_on_read(deferred=…)`) is read as its checked msgspec Struct, `wire` (in the
    instance dict only), and its `event` built from it on first read."""

    kind: int
    transfer_id: int
    lineage_hash: int
    payload: bytes = field(repr=False)
    body: Any = field(repr=False)
    event: Any = field(default=None, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        """`body` of a transfer decoded straight into its event (aotx.journal.whole): unpacked on first read;
        `event` of one decoded into its Struct (`wire`): built on first read."""
        d = self.__dict__
        if name == "event" and "wire" in d:
            wire = d["wire"]
            event = d["event"] = WIRE_BUILDERS[wire.__class__](wire)
            return event
        if name != "body" or "payload" not in d:
            raise AttributeError(name)
        body = d["body"] = unpack_body(d["payload"])
        return body

    @functools.cached_property
    def digest(self) -> bytes:
        """Computed once (the reassembler stores the one it verified)."""
        return transfer_digest(self.kind, self.transfer_id, self.lineage_hash, self.payload)


# `event` has no class-level default: every Transfer(...) sets it (its __init__ default is None) and the fast path
# sets it or `wire`, so an instance without it in its dict is one whose event `__getattr__` builds from `wire`
del Transfer.event
# a deferred kind's Struct class → the function building its event (filled by aotx.journal.registry)
WIRE_BUILDERS: dict[type, Callable[[Any], Any]] = {}


def _checked(kind: int, transfer_id: int, payload: bytes) -> None:
    if not 0 <= kind <= 0xFFFFFFFF or not 0 <= transfer_id <= 0xFFFFFFFFFFFFFFFF:
        raise JournalFormatError(f"transfer kind {kind} or id {transfer_id} out of range")
    if len(payload) > MAX_PAYLOAD:
        raise JournalFormatError(f"transfer {transfer_id}: payload {len(payload)} bytes over {MAX_PAYLOAD}")


def encode_transfer(kind: int, transfer_id: int, lineage: int, payload: bytes) -> tuple[bytes, list[bytes]]:
    """(the transfer's digest, its records encoded, in order): the bytes `split_transfer`'s records
    encode to, built straight from the payload (the emitter's path: no Record object per part; each
    record's header packed and its crc32c taken inline, record_bytes's bytes)."""
    if not (0 <= kind <= 0xFFFFFFFF and 0 <= transfer_id <= 0xFFFFFFFFFFFFFFFF and len(payload) <= MAX_PAYLOAD):
        _checked(kind, transfer_id, payload)
    h = _DIGEST_HASH.copy()
    h.update(_DIGEST_PREFIX.pack(kind, transfer_id, lineage, len(payload)))
    h.update(payload)
    digest = h.digest()
    data = payload + digest
    size = len(data)
    pack, crc = _HEADER_PACK, _CRC
    if size <= MAX_BODY:
        return digest, [pack(RECORD_TYPE, RECORD_CLASS, size, kind, transfer_id, 0, 1, crc(data), lineage) + data]
    count = -(-size // MAX_BODY)
    parts = []
    for i in range(count):
        body = data[i * MAX_BODY:(i + 1) * MAX_BODY]
        parts.append(pack(RECORD_TYPE, RECORD_CLASS, len(body), kind, transfer_id, i, count, crc(body), lineage) + body)
    return digest, parts


def split_transfer(kind: int, transfer_id: int, lineage: int, payload: bytes) -> list[Record]:
    """The records of one transfer, in order."""
    _checked(kind, transfer_id, payload)
    data = payload + transfer_digest(kind, transfer_id, lineage, payload)
    chunks = [data[i:i + MAX_BODY] for i in range(0, len(data), MAX_BODY)]
    return [Record(kind, transfer_id, i, len(chunks), lineage, chunk) for i, chunk in enumerate(chunks)]
