"""A tick that holds whole transfers carries them as the reassembler would yield them, so the
writer applies its own acknowledged ticks without framing and verifying its own bytes again; the
reassembler takes them only where its own bookkeeping agrees (nothing open on the lineage, ids
increasing), else the bytes go the replay way."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from aotx.journal import Emitter, Reassembler

LH = 0x0123456789ABCDEF
bodies = st.lists(st.one_of(st.binary(max_size=600), st.dictionaries(st.text(max_size=8), st.integers(-(1 << 63), (1 << 64) - 1), max_size=4),
                            st.text(max_size=300)), min_size=1, max_size=12)


@given(bodies, st.integers(1, 16))
def test_a_tick_of_whole_transfers_carries_what_reassembly_yields(values, per_tick):
    e = Emitter(LH, next_transfer_id=5, records_per_tick=per_tick)
    for v in values:
        e.submit(1, v)
    replay, live = Reassembler(), Reassembler()
    for tick in e.drain():
        done = replay.feed_message(tick.data, position=1)
        if tick.transfers:
            assert [t.transfer_id for t in tick.transfers] == list(tick.completes)
            assert [(t.kind, t.transfer_id, t.lineage_hash, t.payload, t.body, t.digest) for t in tick.transfers] == \
                [(t.kind, t.transfer_id, t.lineage_hash, t.payload, t.body, t.digest) for t in done]
            assert live.accept_whole(LH, tick.transfers)
        else:   # a tick that starts or ends inside a transfer goes the replay way
            assert live.feed_message(tick.data, position=1) == done
    assert live.open_transfers == replay.open_transfers == []
    assert live._last_id == replay._last_id


def test_whole_transfers_are_refused_while_a_transfer_is_open_or_out_of_order():
    e = Emitter(LH, records_per_tick=2)
    e.submit(1, os.urandom(400))     # 3 records: open after the first tick
    e.submit(1, b"small")
    first, second = e.drain()
    r = Reassembler()
    r.feed_message(first.data)
    assert not first.transfers and second.transfers == ()   # neither holds only whole transfers
    one = Emitter(LH, next_transfer_id=3)
    one.submit(1, b"x")
    (tick,) = one.drain()
    assert not r.accept_whole(LH, tick.transfers)            # transfer 1 is still open on LH
    fresh = Reassembler()
    assert fresh.accept_whole(LH, tick.transfers)
    assert not fresh.accept_whole(LH, tick.transfers)        # ids must increase


@given(bodies, st.integers(1, 16))
def test_whole_packing_never_splits_a_transfer_that_fits_a_tick(values, per_tick):
    """Emitter(whole=True) (a stored round's ticks): a tick ends before a transfer that would not fit
    in it whole, so every transfer of at most `per_tick` records lies in one tick and a tick made only of
    such transfers carries them (Tick.transfers); the records, in order, are the default packing's."""
    packed, plain = Emitter(LH, records_per_tick=per_tick, whole=True), Emitter(LH, records_per_tick=per_tick)
    sizes = []
    for v in values:
        packed.submit(1, v)
        plain.submit(1, v)
        sizes.append(packed.pending - sum(sizes))
    ticks = packed.drain()
    assert b"".join(t.data for t in ticks) == b"".join(t.data for t in plain.drain())
    assert all(t.records <= per_tick for t in ticks)
    replay = Reassembler()
    for tick in ticks:
        replay.feed_message(tick.data, position=1)
        fits = [size <= per_tick for size, tid in zip(sizes, range(1, len(sizes) + 1))
                if tid in tick.completes or tid == tick.first[0]]
        if all(fits):
            assert tick.transfers and [t.transfer_id for t in tick.transfers] == list(tick.completes)
    assert replay.open_transfers == []


@given(bodies, st.integers(1, 16), st.booleans(), st.integers(1, 1 << 40))
def test_a_ticks_bytes_are_its_records_encoded_one_by_one(values, per_tick, whole, first_id):
    """The emitter encodes a transfer's records straight from its payload (encode_transfer: no Record
    objects): the bytes of its ticks, in order, are exactly split_transfer's records each encoded, and a
    tick's Transfer carries the transfer's digest."""
    from aotx.journal.transfer import encode_transfer, pack_body, split_transfer, transfer_digest

    e = Emitter(LH, next_transfer_id=first_id, records_per_tick=per_tick, whole=whole)
    reference = []
    for n, v in enumerate(values):
        payload = pack_body(v)
        e.submit_payload(9, payload)
        records = split_transfer(9, first_id + n, LH, payload)
        reference += [r.encode() for r in records]
        digest, parts = encode_transfer(9, first_id + n, LH, payload)
        assert parts == [r.encode() for r in records] and digest == transfer_digest(9, first_id + n, LH, payload)
    ticks = e.drain()
    assert b"".join(t.data for t in ticks) == b"".join(reference)
    assert sum(t.records for t in ticks) == len(reference)
    for t in ticks:
        for tr in t.transfers:
            assert tr.digest == transfer_digest(tr.kind, tr.transfer_id, LH, tr.payload)


@given(bodies, st.integers(1, 16), st.booleans())
def test_ticks_needed_is_how_many_ticks_the_queue_makes(values, per_tick, whole):
    e = Emitter(LH, records_per_tick=per_tick, whole=whole)
    for v in values:
        e.submit(1, v)
    predicted = (e.ticks_needed(True), e.ticks_needed(False))
    assert len(e.drain()) == predicted[0 if whole else 1]


def test_ticks_needed_after_a_transfer_larger_than_a_tick():
    """Sizes 5, 4, 1 records at 4 a tick, cut whole: [T1 0-3] [T1 4, T2 0-2] [T2 3, T3]: after a transfer
    that spans ticks, a tick begun inside a transfer takes as many records as fit."""
    e = Emitter(LH, records_per_tick=4, whole=True)
    for size in (5 * 160 - 40, 4 * 160 - 40, 1):
        e.submit_payload(1, b"x" * size)
    assert [e.pending, e.ticks_needed(True)] == [10, 3]
    assert [t.records for t in e.drain()] == [4, 4, 2]
