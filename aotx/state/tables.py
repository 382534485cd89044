"""Fixed-capacity tables as numpy structured arrays.

Participants, spaces, conversations and member rows are append-only (never freed), so a
row's index is a stable handle. Receipt rows are freed by retirement (`used` = 0, row
zeroed) and reused lowest-slot-first. Arrays held by a State are read-only; `apply` copies
the arrays it changes.
"""

from __future__ import annotations

import struct

import numpy as np

from .capacities import Capacities
from .errors import CapacityFull

B16 = ("u1", (16,))

PARTICIPANT = np.dtype([
    ("lineage", *B16), ("ident", *B16),        # par-{lineage}-{ident}
    ("next_sequence", "<u8"), ("retry_floor", "<u8"),
])
SPACE = np.dtype([
    ("lineage", *B16), ("ident", *B16),        # spc-{lineage}-{ident}; lineage = the owner's
    ("owner", "<u4"),                          # participant row
    ("scope", "u1"),
])
CONVERSATION = np.dtype([
    ("lineage", *B16), ("ident", *B16),        # con-{lineage}-{ident}; lineage = the creator's
    ("space", "<u4"), ("creator", "<u4"),      # space row, participant row
])
MEMBER = np.dtype([
    ("space", "<u4"), ("participant", "<u4"),  # rows
    ("rights", "u1"),                          # Rights bits; 0 = an explicit zero-rights row
])
RECEIPT = np.dtype([
    ("used", "u1"),
    ("lineage", *B16), ("sequence", "<u8"),
    ("operation", *B16),                       # op-{lineage}-{operation}, runtime-assigned
    ("operation_key", *B16),                   # the caller's key
    ("kind", "u1"),                            # MutationKind code
    ("http_status", "<u2"),                    # status of the new operation (201)
    ("transport", "u1"), ("commit", "u1"), ("admission", "u1"), ("terminal", "u1"),
    ("resource_kind", "u1"),                   # ResourceKind code of what it made/changed
    ("resource_lineage", *B16), ("resource_ident", *B16),
    ("command_len", "<u4"), ("result_len", "<u4"),
])

# one receipt row as packed bytes (field order and widths of RECEIPT): apply writes a row with one
# pack, receipt_json reads one with one unpack
RECEIPT_ROW = struct.Struct("<B16sQ16s16sBHBBBBB16s16sII")
assert RECEIPT_ROW.size == RECEIPT.itemsize and RECEIPT.names == (
    "used", "lineage", "sequence", "operation", "operation_key", "kind", "http_status", "transport", "commit",
    "admission", "terminal", "resource_kind", "resource_lineage", "resource_ident", "command_len", "result_len")
# the member, conversation, space and participant rows likewise (apply writes a new row with one pack_into)
MEMBER_ROW = struct.Struct("<IIB")    # space, participant, rights
CONVERSATION_ROW, SPACE_ROW, PARTICIPANT_ROW = (struct.Struct(f) for f in ("<16s16sII", "<16s16sIB", "<16s16sQQ"))
assert [(n, MEMBER.fields[n][0].str) for n in MEMBER.names] == [("space", "<u4"), ("participant", "<u4"),
                                                               ("rights", "|u1")] and MEMBER.itemsize == MEMBER_ROW.size
assert [(t.names, t.itemsize) for t in (CONVERSATION, SPACE, PARTICIPANT)] == [(("lineage", "ident", "space", "creator"),
    CONVERSATION_ROW.size), (("lineage", "ident", "owner", "scope"), SPACE_ROW.size), (("lineage", "ident",
    "next_sequence", "retry_floor"), PARTICIPANT_ROW.size)]

TABLES = ("participants", "spaces", "conversations", "members", "receipts")
DTYPES = {"participants": PARTICIPANT, "spaces": SPACE, "conversations": CONVERSATION,
          "members": MEMBER, "receipts": RECEIPT}


def empty_table(name: str, caps: Capacities) -> np.ndarray:
    arr = np.zeros(getattr(caps, name), dtype=DTYPES[name])
    arr.flags.writeable = False
    return arr


def frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def b16(value: bytes) -> np.ndarray:
    return np.frombuffer(value, dtype=np.uint8)


def raw(field: np.ndarray) -> bytes:
    """Bytes of one 16-byte field of one row."""
    return field.tobytes()


def match16(column: np.ndarray, value: bytes) -> np.ndarray:
    """Boolean mask over rows whose 16-byte column equals value."""
    return np.all(column == b16(value), axis=1)


def append_row(name: str, arr: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """A writable copy of arr and the index of its next free append-only row."""
    if count >= len(arr):
        raise CapacityFull(name, len(arr))
    return arr.copy(), count


def free_receipt_slot(arr: np.ndarray) -> int:
    """Lowest unused receipt row; CapacityFull('receipts') if none."""
    free = np.flatnonzero(arr["used"] == 0)
    if free.size == 0:
        raise CapacityFull("receipts", len(arr))
    return int(free[0])
