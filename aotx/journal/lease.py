"""Execution lease records (DESIGN §8), revisions 0–5.

Header, 8 bytes little-endian: u32 row_count, u32 revision. Then row_count rows.

Revisions 2–5, 40-byte rows:      Revisions 0–1, 32-byte rows:
  @0  u32 request index             @0  u32 request index
  @4  u32 slot                      @4  u32 slot
  @8  u64 sequence                  @8  u64 sequence
  @16 16 bytes actor                @16 16 bytes actor
  @32 u32 retention mode (1 or 2)
  @36 u32 reserved, must be zero

Revisions 0–1 carry no mode word (their mode comes from separate interpretation records):
decoded rows have retention_mode None. Every row is validated before a Lease is returned,
so a caller never applies part of a bad lease.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from .errors import LeaseError

HEADER = struct.Struct("<II")
ROW_V0 = struct.Struct("<IIQ16s")
ROW_V2 = struct.Struct("<IIQ16sII")
assert (HEADER.size, ROW_V0.size, ROW_V2.size) == (8, 32, 40)


class LeaseRevision(enum.IntEnum):
    R0 = 0  # original 32-byte rows
    R1 = 1  # 32-byte rows, mode 2 interpretation records kept separately
    R2 = 2  # 40-byte rows; previous query and prompt bytes
    R3 = 3  # compact context rendering + historical-data system rule
    R4 = 4  # source-only leases; repeated source labels shared within the context byte limit
    R5 = 5  # affect-managed leases; same query format as R4

    @property
    def row_size(self) -> int:
        return ROW_V0.size if self < LeaseRevision.R2 else ROW_V2.size

    @property
    def has_mode(self) -> bool:
        return self >= LeaseRevision.R2


class RetentionMode(enum.IntEnum):
    SOURCE_TEXT = 1  # retain source text
    INTERPRETED = 2  # also a qualified automatic interpretation


@dataclass(frozen=True)
class LeaseRow:
    request_index: int
    slot: int
    sequence: int
    actor: bytes
    retention_mode: int | None = None


@dataclass(frozen=True)
class Lease:
    revision: LeaseRevision
    rows: tuple[LeaseRow, ...]


def _check_row(rev: LeaseRevision, i: int, row: LeaseRow) -> None:
    if len(row.actor) != 16:
        raise LeaseError(f"actor is {len(row.actor)} bytes, not 16", row=i)
    for name, value, bits in (("request index", row.request_index, 32), ("slot", row.slot, 32),
                              ("sequence", row.sequence, 64)):
        if not 0 <= value < 1 << bits:
            raise LeaseError(f"{name} {value} does not fit u{bits}", row=i)
    if rev.has_mode:
        if row.retention_mode not in (RetentionMode.SOURCE_TEXT, RetentionMode.INTERPRETED):
            raise LeaseError(f"retention mode {row.retention_mode} is not 1 or 2", row=i)
    elif row.retention_mode is not None:
        raise LeaseError(f"revision {int(rev)} rows have no retention mode word", row=i)


def _check_rows(rev: LeaseRevision, rows: tuple[LeaseRow, ...]) -> None:
    if not rows:
        raise LeaseError("row_count is 0")
    seen_requests: dict[int, int] = {}
    seen_slots: dict[int, int] = {}
    for i, row in enumerate(rows):
        _check_row(rev, i, row)
        if row.request_index in seen_requests:
            raise LeaseError(f"request index {row.request_index} repeats row {seen_requests[row.request_index]}", row=i)
        if row.slot in seen_slots:
            raise LeaseError(f"slot {row.slot} repeats row {seen_slots[row.slot]}", row=i)
        seen_requests[row.request_index], seen_slots[row.slot] = i, i


def _revision(value: int) -> LeaseRevision:
    try:
        return LeaseRevision(value)
    except ValueError:
        raise LeaseError(f"unknown revision {value}") from None


def encode_lease(lease: Lease) -> bytes:
    rev = _revision(int(lease.revision))
    rows = tuple(lease.rows)
    _check_rows(rev, rows)
    out = [HEADER.pack(len(rows), int(rev))]
    for row in rows:
        if rev.has_mode:
            out.append(ROW_V2.pack(row.request_index, row.slot, row.sequence, row.actor, int(row.retention_mode), 0))
        else:
            out.append(ROW_V0.pack(row.request_index, row.slot, row.sequence, row.actor))
    return b"".join(out)


def decode_lease(data: bytes) -> Lease:
    """Decode and validate every row; raises LeaseError naming the first bad row."""
    if len(data) < HEADER.size:
        raise LeaseError(f"{len(data)} bytes, header needs {HEADER.size}")
    count, raw_rev = HEADER.unpack_from(data, 0)
    rev = _revision(raw_rev)
    want = HEADER.size + count * rev.row_size
    if len(data) != want:
        raise LeaseError(f"{len(data)} bytes, {count} rows of revision {raw_rev} need exactly {want}")
    rows = []
    for i in range(count):
        off = HEADER.size + i * rev.row_size
        if rev.has_mode:
            req, slot, seq, actor, mode, reserved = ROW_V2.unpack_from(data, off)
            if reserved != 0:
                raise LeaseError(f"reserved word is {reserved:#010x}, must be zero", row=i)
        else:
            req, slot, seq, actor = ROW_V0.unpack_from(data, off)
            mode = None
        rows.append(LeaseRow(req, slot, seq, actor, mode))
    _check_rows(rev, tuple(rows))
    return Lease(rev, tuple(rows))
