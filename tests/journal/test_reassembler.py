"""The reassembler applies complete, consistent transfers only, and fails closed in recovery."""

import pytest
from hypothesis import given, settings, strategies as st

from aotx.journal import (
    Emitter, Reassembler, Record, RecordError, TransferError, decode_records, lineage_hash, pack_body,
    split_transfer,
)
from aotx.journal.transfer import transfer_digest

LH = lineage_hash("0123456789abcdef0123456789abcdef")
LH2 = lineage_hash("fedcba9876543210fedcba9876543210")

msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=40) | st.binary(max_size=400),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)


def _records(*bodies, first_id=1, lh=LH, kind=4):
    """Records as a reader meets them: encoded, then parsed back (so each carries its crc)."""
    out = []
    for i, body in enumerate(bodies):
        out += split_transfer(kind, first_id + i, lh, pack_body(body))
    return decode_records(b"".join(r.encode() for r in out))


def _feed(records):
    r = Reassembler()
    done = [t for rec in records if (t := r.feed_record(rec))]
    r.finish()
    return r, done


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.tuples(st.integers(0, 2**32 - 1), msgpack_values), min_size=1, max_size=6),
       per_tick=st.integers(1, 16))
def test_round_trip_through_ticks(bodies, per_tick):
    emitter = Emitter(LH, records_per_tick=per_tick)
    ids = [emitter.submit(kind, body) for kind, body in bodies]
    r = Reassembler()
    got = []
    for pos, tick in enumerate(emitter.drain()):
        assert tick.records <= per_tick
        got += r.feed_message(tick.data, position=pos)
    r.finish()
    assert [(t.transfer_id, t.kind, t.body) for t in got] == [(i, k, b) for i, (k, b) in zip(ids, bodies)]
    assert all(t.digest == transfer_digest(t.kind, t.transfer_id, LH, t.payload) for t in got)


def test_two_lineages_may_interleave():
    a, b = _records("a" * 300, lh=LH), _records("b" * 300, lh=LH2)
    mixed = [x for pair in zip(a, b) for x in pair] + a[len(b):] + b[len(a):]
    r, done = _feed(mixed)
    assert sorted(t.body for t in done) == ["a" * 300, "b" * 300]


def test_applied_only_when_complete():
    records = _records({"k": "v" * 500})
    r = Reassembler()
    assert [r.feed_record(x) for x in records[:-1]] == [None] * (len(records) - 1)
    assert r.open_transfers == [(LH, 1, len(records) - 1, len(records))]
    assert r.feed_record(records[-1]).body == {"k": "v" * 500}
    r.finish()


def _flip(rec: Record, at: int) -> Record:
    body = bytearray(rec.body)
    body[at] ^= 0x01
    return Record(rec.transfer_kind, rec.transfer_id, rec.part_index, rec.part_count, rec.lineage_hash,
                  bytes(body), rec.crc)


def _with(rec: Record, **changes) -> Record:
    fields = {**rec.__dict__, **changes}
    fields["crc"] = None  # consistent checksum: only the named field is wrong
    return Record(**fields)


FIVE = _records("x" * 700, "second")  # transfer 1: 5 parts, transfer 2: 1 part


@pytest.mark.parametrize("name, records, code, tid, part", [
    ("flipped body byte", FIVE[:2] + [_flip(FIVE[2], 7)] + FIVE[3:], "checksum", 1, 2),
    ("dropped part", FIVE[:2] + FIVE[3:], "order", 1, 3),
    ("reordered parts", [FIVE[0], FIVE[2], FIVE[1]] + FIVE[3:], "order", 1, 2),
    ("duplicated part", FIVE[:3] + [FIVE[2]] + FIVE[3:], "duplicate", 1, 2),
    ("wrong count", FIVE[:1] + [_with(FIVE[1], part_count=6)] + FIVE[2:], "count", 1, 1),
    ("index beyond count", [_with(FIVE[0], part_index=5)], "count", 1, 5),
    ("zero count", [_with(FIVE[0], part_count=0)], "count", 1, 0),
    ("missing first part", FIVE[1:], "order", 1, 1),
    ("kind changes", FIVE[:1] + [_with(FIVE[1], transfer_kind=9)] + FIVE[2:], "kind", 1, 1),
    ("short middle part", FIVE[:1] + [_with(FIVE[1], body=FIVE[1].body[:100])] + FIVE[2:], "length", 1, 1),
    ("digest (consistent crc, changed byte)", FIVE[:4] + [_with(FIVE[4], body=b"\x00" + FIVE[4].body[1:])],
     "digest", 1, 4),
    ("interleaved transfer", FIVE[:2] + [FIVE[5]] + FIVE[2:5], "interleaved", 1, 0),
    ("replayed transfer", FIVE + FIVE[5:], "duplicate", 2, 0),
    ("not msgpack", split_transfer(4, 1, LH, b"\xc1"), "body", 1, 0),
])
def test_corruption_fails_closed_in_recovery(name, records, code, tid, part):
    r = Reassembler(recovery=True)
    applied = []
    with pytest.raises(TransferError) as info:
        for rec in records:
            if (t := r.feed_record(rec, position=3)) is not None:
                applied.append(t.transfer_id)
        r.finish()
    err = info.value
    assert (err.code, err.transfer_id, err.part_index) == (code, tid, part), str(err)
    assert f"transfer {tid} part {part}" in str(err) and code in str(err)
    assert applied.count(tid) == (1 if name == "replayed transfer" else 0)  # never applied twice


def test_partial_transfer_at_end_of_recovery():
    r = Reassembler()
    for rec in FIVE[:3]:
        r.feed_record(rec)
    with pytest.raises(TransferError, match=r"transfer 1 part 3/5 .*incomplete: only 3 of 5 parts present"):
        r.finish()


def test_bad_message_framing_fails_closed_in_recovery():
    with pytest.raises(RecordError, match="message 4 record at byte 0"):
        Reassembler().feed_message(b"\x25\x41" + bytes(10), position=4)


def test_live_mode_drops_bad_transfers_and_keeps_going():
    bad = FIVE[:2] + [_flip(FIVE[2], 0)] + FIVE[3:5]
    good = _records("after", first_id=3)
    r = Reassembler(recovery=False)
    done = [t for rec in bad + FIVE[5:] + good if (t := r.feed_record(rec))]
    assert [t.transfer_id for t in done] == [2, 3]
    assert [f.code for f in r.faults] == ["checksum", "order", "order"]
    r.feed_message(b"junk")
    assert isinstance(r.faults[-1], RecordError)
    r.finish()  # live: a partial tail may still complete; nothing raised


def test_live_mode_interleave_starts_the_new_transfer():
    r = Reassembler(recovery=False)
    done = [t for rec in FIVE[:2] + FIVE[5:] if (t := r.feed_record(rec))]
    assert [t.transfer_id for t in done] == [2] and r.faults[0].code == "interleaved"


def test_records_from_a_real_message_keep_their_crc():
    emitter = Emitter(LH)
    emitter.submit(2, {"a": 1})
    (rec,) = decode_records(emitter.tick().data)
    assert rec.crc is not None
