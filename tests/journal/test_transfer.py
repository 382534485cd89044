"""Transfers and the emitter: golden bytes, splitting, ticks of at most 16 records."""

import pytest

from aotx.journal import (
    DIGEST_SIZE, MAX_BODY, MAX_RECORDS_PER_TICK, Emitter, JournalFormatError, TransferKind,
    decode_records, lineage_hash, pack_body, split_transfer, transfer_digest,
)

LINEAGE = "0123456789abcdef0123456789abcdef"
LH = 0x713097D40DDC49B9  # lineage_hash(LINEAGE), pinned

# One lease transfer (kind 3, id 7) with body {"slot": 3}: one record.
# header: 25 41 | body_len 0x17 | kind 3 | id 7 | part 0 of 1 | crc32c | lineage hash
# body:   msgpack 81 a4 "slot" 03 | digest (16 bytes)
GOLDEN_TICK = bytes.fromhex(
    "25" "41" "1700" "03000000" "0700000000000000" "0000" "0100" "ef52f916" "b949dc0dd4973071"
    "81a4736c6f7403" "b6b49a7e3a61ac6c8360da311103a8cd"
)


def test_lineage_hash_is_pinned():
    assert lineage_hash(LINEAGE) == LH == lineage_hash(bytes.fromhex(LINEAGE))


def test_golden_transfer_tick():
    assert transfer_digest(3, 7, LH, pack_body({"slot": 3})).hex() == "b6b49a7e3a61ac6c8360da311103a8cd"
    emitter = Emitter(LH, next_transfer_id=7)
    assert emitter.submit(TransferKind.LEASE, {"slot": 3}) == 7
    tick = emitter.tick()
    assert tick.data == GOLDEN_TICK
    assert (tick.records, tick.completes, tick.first) == (1, (7,), (7, 0))
    assert tick.msg_id == "j37-713097d40ddc49b9-7-0"
    assert emitter.tick() is None


@pytest.mark.parametrize("size, parts", [(0, 1), (144, 1), (145, 2), (304, 2), (305, 3), (1000, 7)])
def test_split_sizes(size, parts):
    payload = bytes(range(256)) * 4
    records = split_transfer(1, 1, LH, payload[:size])
    assert len(records) == parts
    assert all(len(r.body) == MAX_BODY for r in records[:-1]) and 1 <= len(records[-1].body) <= MAX_BODY
    assert [r.part_index for r in records] == list(range(parts))
    assert {r.part_count for r in records} == {parts}
    assert b"".join(r.body for r in records)[:-DIGEST_SIZE] == payload[:size]


def test_split_rejects_out_of_range():
    with pytest.raises(JournalFormatError):
        split_transfer(1 << 32, 1, LH, b"")
    with pytest.raises(JournalFormatError, match="over"):
        split_transfer(1, 1, LH, bytes(0xFFFF * MAX_BODY))


def test_emitter_packs_at_most_16_records_per_tick():
    emitter = Emitter(LH)
    ids = [emitter.submit(TransferKind.OUTPUT, {"text": "y" * 700}) for _ in range(5)]  # 5 parts each
    assert ids == [1, 2, 3, 4, 5] and emitter.pending == 25
    ticks = emitter.drain()
    assert [t.records for t in ticks] == [16, 9]
    assert all(t.records <= MAX_RECORDS_PER_TICK for t in ticks)
    assert ticks[0].completes == (1, 2, 3) and ticks[1].completes == (4, 5)
    assert ticks[1].first == (4, 1)  # transfer 4 spans both ticks
    records = [r for t in ticks for r in decode_records(t.data)]
    assert [(r.transfer_id, r.part_index) for r in records] == [(t, p) for t in ids for p in range(5)]


def test_emitter_settings():
    with pytest.raises(ValueError):
        Emitter(LH, records_per_tick=17)
    with pytest.raises(ValueError):
        Emitter(LH, next_transfer_id=0)
    assert [t.records for t in Emitter(LH, records_per_tick=4).drain()] == []
