"""Lease records, revisions 0–5: golden bytes, round trips, and validation before anything applies."""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from aotx.journal import Lease, LeaseError, LeaseRevision, LeaseRow, decode_lease, encode_lease

ACTOR_A = bytes(range(16))
ACTOR_B = b"\xff" * 16

# Two rows: (request 1, slot 2, sequence 0x0102030405060708, actor 00..0f, mode m)
#           (request 5, slot 9, sequence 1, actor ff*16, mode 3-m)
ROW_A = "01000000" "02000000" "0807060504030201" "000102030405060708090a0b0c0d0e0f"
ROW_B = "05000000" "09000000" "0100000000000000" "ffffffffffffffffffffffffffffffff"
GOLDEN = {
    0: "02000000" "00000000" + ROW_A + ROW_B,
    1: "02000000" "01000000" + ROW_A + ROW_B,
    2: "02000000" "02000000" + ROW_A + "01000000" "00000000" + ROW_B + "02000000" "00000000",
    3: "02000000" "03000000" + ROW_A + "02000000" "00000000" + ROW_B + "01000000" "00000000",
    4: "02000000" "04000000" + ROW_A + "01000000" "00000000" + ROW_B + "02000000" "00000000",
    5: "02000000" "05000000" + ROW_A + "02000000" "00000000" + ROW_B + "01000000" "00000000",
}
FULL_HEX = {  # the same, as single literals
    0: "020000000000000001000000020000000807060504030201000102030405060708090a0b0c0d0e0f0500000009000000"
       "0100000000000000ffffffffffffffffffffffffffffffff",
    2: "020000000200000001000000020000000807060504030201000102030405060708090a0b0c0d0e0f0100000000000000"
       "05000000090000000100000000000000ffffffffffffffffffffffffffffffff0200000000000000",
}


def _lease(rev: int) -> Lease:
    mode_a = None if rev < 2 else (1 if rev % 2 == 0 else 2)
    mode_b = None if mode_a is None else 3 - mode_a
    return Lease(LeaseRevision(rev), (LeaseRow(1, 2, 0x0102030405060708, ACTOR_A, mode_a),
                                      LeaseRow(5, 9, 1, ACTOR_B, mode_b)))


@pytest.mark.parametrize("rev", range(6))
def test_golden_bytes(rev):
    data = bytes.fromhex(GOLDEN[rev])
    assert len(data) == 8 + 2 * (32 if rev < 2 else 40)
    assert encode_lease(_lease(rev)) == data
    assert decode_lease(data) == _lease(rev)
    if rev in FULL_HEX:
        assert data == bytes.fromhex(FULL_HEX[rev])


def test_revision_properties():
    assert [r.row_size for r in LeaseRevision] == [32, 32, 40, 40, 40, 40]
    assert [r.has_mode for r in LeaseRevision] == [False, False, True, True, True, True]


rows_v2 = st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.binary(min_size=16, max_size=16),
                             st.sampled_from([1, 2])), min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(rev=st.integers(0, 5), rows=rows_v2)
def test_round_trip(rev, rows):
    lease = Lease(LeaseRevision(rev), tuple(
        LeaseRow(i, slot, seq, actor, mode if rev >= 2 else None) for i, (slot, seq, actor, mode) in enumerate(rows)))
    slots = [r.slot for r in lease.rows]
    if len(set(slots)) != len(slots):
        with pytest.raises(LeaseError, match="slot"):
            encode_lease(lease)
        return
    data = encode_lease(lease)
    assert len(data) == 8 + len(rows) * LeaseRevision(rev).row_size
    assert decode_lease(data) == lease


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


V2 = bytes.fromhex(GOLDEN[2])
V0 = bytes.fromhex(GOLDEN[0])


@pytest.mark.parametrize("data, row, match", [
    (b"\x01\x00\x00", None, "header needs 8"),
    (_patch(V2, 4, "<I", 6), None, "unknown revision 6"),
    (_patch(V2, 0, "<I", 3), None, "need exactly 128"),
    (V2[:-1], None, "need exactly 88"),
    (V2 + b"\x00", None, "need exactly 88"),
    (_patch(V0, 4, "<I", 2), None, "need exactly 88"),  # a 32-byte-row lease relabelled as revision 2
    (_patch(V2, 0, "<I", 0)[:8], None, "row_count is 0"),
    (_patch(V2, 8 + 40 + 36, "<I", 1), 1, "reserved word is 0x00000001"),
    (_patch(V2, 8 + 32, "<I", 0), 0, "retention mode 0"),
    (_patch(V2, 8 + 40 + 32, "<I", 3), 1, "retention mode 3"),
    (_patch(V2, 8 + 40, "<I", 1), 1, "request index 1 repeats row 0"),
    (_patch(V2, 8 + 40 + 4, "<I", 2), 1, "slot 2 repeats row 0"),
    (_patch(V0, 8 + 32 + 4, "<I", 2), 1, "slot 2 repeats row 0"),
])
def test_corrupt_leases_fail_before_anything_applies(data, row, match):
    with pytest.raises(LeaseError, match=match) as info:
        decode_lease(data)
    assert info.value.row == row


def test_encode_validates_too():
    with pytest.raises(LeaseError, match="no retention mode"):
        encode_lease(Lease(LeaseRevision.R1, (LeaseRow(0, 0, 1, ACTOR_A, 1),)))
    with pytest.raises(LeaseError, match="not 1 or 2"):
        encode_lease(Lease(LeaseRevision.R3, (LeaseRow(0, 0, 1, ACTOR_A, None),)))
    with pytest.raises(LeaseError, match="actor is 15 bytes"):
        encode_lease(Lease(LeaseRevision.R3, (LeaseRow(0, 0, 1, ACTOR_A[:15], 1),)))
    with pytest.raises(LeaseError, match="u32"):
        encode_lease(Lease(LeaseRevision.R3, (LeaseRow(2**32, 0, 1, ACTOR_A, 1),)))
    with pytest.raises(LeaseError, match="unknown revision 9"):
        encode_lease(Lease(9, (LeaseRow(0, 0, 1, ACTOR_A, 1),)))
