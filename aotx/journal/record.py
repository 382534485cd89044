"""Type-37 class-A records: a 32-byte little-endian part header and at most 160 body bytes.

    off size field
      0   1  type          = 37
      1   1  class         = 0x41 ('A')
      2   2  body_len      (1..160)
      4   4  transfer_kind
      8   8  transfer_id
     16   2  part_index    (0-based)
     18   2  part_count    (>= 1)
     20   4  crc32c(body)
     24   8  lineage_hash
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from .crc32c import crc32c
from .errors import RecordError

RECORD_TYPE = 37
RECORD_CLASS = 0x41
HEADER_SIZE = 32
MAX_BODY = 160
HEADER = struct.Struct("<BBHIQHHIQ")
assert HEADER.size == HEADER_SIZE


def record_bytes(kind: int, transfer_id: int, index: int, count: int, lineage: int, body: bytes,
                 crc: int | None = None) -> bytes:
    """One record's bytes: the header (its crc32c of `body` unless given) and the body."""
    return HEADER.pack(RECORD_TYPE, RECORD_CLASS, len(body), kind, transfer_id, index, count,
                       crc32c(body) if crc is None else crc, lineage) + body


@dataclass(frozen=True)
class Record:
    transfer_kind: int
    transfer_id: int
    part_index: int
    part_count: int
    lineage_hash: int
    body: bytes
    crc: int | None = None  # as read from the header; None means "compute on encode"

    def encode(self) -> bytes:
        if not 0 < len(self.body) <= MAX_BODY:
            raise RecordError(f"body length {len(self.body)} outside 1..{MAX_BODY}", offset=0,
                              transfer_id=self.transfer_id, part_index=self.part_index)
        return record_bytes(self.transfer_kind, self.transfer_id, self.part_index, self.part_count,
                            self.lineage_hash, self.body, self.crc)


def iter_records(data: bytes, position: int | None = None, *, verify_crc: bool = True) -> Iterator[Record]:
    """Parse a journal message (concatenated records). Checks framing and, unless told not to,
    each body's crc32c (the reassembler checks it itself to name the transfer in its error)."""
    size = len(data)
    unpack = HEADER.unpack_from
    offset = 0
    while offset < size:
        if size - offset < HEADER_SIZE:
            raise RecordError(f"truncated header: {size - offset} of {HEADER_SIZE} bytes",
                              offset=offset, position=position)
        rtype, rclass, body_len, kind, tid, index, count, crc, lineage = unpack(data, offset)
        start = offset + HEADER_SIZE
        reason = None
        if rtype != RECORD_TYPE or rclass != RECORD_CLASS:
            reason = f"type {rtype} class {rclass:#04x}, expected type {RECORD_TYPE} class 'A'"
        elif not 0 < body_len <= MAX_BODY:
            reason = f"body_len {body_len} outside 1..{MAX_BODY}"
        elif size - start < body_len:
            reason = f"truncated body: {size - start} of {body_len} bytes"
        else:
            body = bytes(data[start:start + body_len])
            if verify_crc and (actual := crc32c(body)) != crc:
                reason = f"checksum mismatch: header crc32c {crc:#010x}, body {actual:#010x}"
        if reason is not None:
            raise RecordError(reason, offset=offset, position=position, transfer_id=tid, part_index=index)
        yield Record(kind, tid, index, count, lineage, body, crc)
        offset = start + body_len


def decode_records(data: bytes, position: int | None = None, *, verify_crc: bool = True) -> list[Record]:
    return list(iter_records(data, position, verify_crc=verify_crc))
