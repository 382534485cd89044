"""Type-37 class-A record layout, pinned with golden bytes."""

import pytest

from aotx.journal import HEADER_SIZE, MAX_BODY, Record, RecordError, decode_records

# type 25, class 41, body_len 0300, kind 03000000, id 2a00000000000000, index 0000, count 0100,
# crc32c("abc") b73f4b36, lineage 0102030405060708 (LE of 0x0807060504030201), body "abc"
GOLDEN = bytes.fromhex(
    "25" "41" "0300" "03000000" "2a00000000000000" "0000" "0100" "b73f4b36" "0102030405060708" "616263"
)


def test_golden_record():
    rec = Record(3, 42, 0, 1, 0x0807060504030201, b"abc")
    assert rec.encode() == GOLDEN
    assert len(GOLDEN) == HEADER_SIZE + 3
    (back,) = decode_records(GOLDEN)
    assert (back.transfer_kind, back.transfer_id, back.part_index, back.part_count) == (3, 42, 0, 1)
    assert (back.lineage_hash, back.body, back.crc) == (0x0807060504030201, b"abc", 0x364B3FB7)


def test_body_limits():
    Record(1, 1, 0, 1, 0, b"x" * MAX_BODY).encode()
    for body in (b"", b"x" * (MAX_BODY + 1)):
        with pytest.raises(RecordError, match="body length"):
            Record(1, 1, 0, 1, 0, body).encode()


@pytest.mark.parametrize("mutate, match", [
    (lambda b: b[:20], "truncated header"),
    (lambda b: b[:-1], "truncated body"),
    (lambda b: b"\x26" + b[1:], "type 38"),
    (lambda b: b[:1] + b"B" + b[2:], "class 0x42"),
    (lambda b: b[:2] + b"\xa1\x00" + b[4:], "body_len 161"),
    (lambda b: b[:2] + b"\x00\x00" + b[4:], "body_len 0"),
    (lambda b: b[:-1] + b"d", "checksum mismatch"),
    (lambda b: b[:20] + b"\x00\x00\x00\x00" + b[24:], "checksum mismatch"),
])
def test_bad_framing_fails_closed(mutate, match):
    with pytest.raises(RecordError, match=match) as info:
        decode_records(GOLDEN + mutate(GOLDEN), position=9)
    assert info.value.offset == len(GOLDEN) and info.value.position == 9
    assert "message 9" in str(info.value)
