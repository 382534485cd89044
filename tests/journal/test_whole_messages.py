"""The reassembler's fast path (aotx.journal.whole) takes a message of whole transfers in one loop;
it must be indistinguishable from feeding the same message record by record: the same transfers
(kind, id, lineage, payload, body, digest), the same error (type, code, text) in recovery, the same
faults live, and the same bookkeeping afterwards — for valid messages and for damaged ones
(a flipped byte, a cut, a message fed twice, one skipped, two lineages in one message, one header
field of one record changed with its crc32c still valid)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aotx.journal import Emitter, JournalFormatError, Reassembler
from aotx.journal.record import HEADER

LINEAGES = (0x0123456789ABCDEF, 0xFEDCBA9876543210)
values = st.one_of(st.binary(max_size=500), st.text(max_size=200),
                   st.dictionaries(st.text(max_size=6), st.integers(-(1 << 63), (1 << 64) - 1), max_size=3))


@st.composite
def journals(draw):
    """Messages of one or two lineages' ticks, in order, then damaged a few ways."""
    messages: list[bytes] = []
    for lh in draw(st.permutations(LINEAGES))[:draw(st.integers(1, 2))]:
        e = Emitter(lh, next_transfer_id=draw(st.integers(1, 5)), records_per_tick=draw(st.integers(1, 16)))
        for v in draw(st.lists(values, min_size=1, max_size=6)):
            e.submit(1, v)
        messages += [t.data for t in e.drain()]
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(messages) - 1))
        data = bytearray(messages[i])
        how = draw(st.sampled_from(["flip", "cut", "twice", "skip", "join", "edit"]))
        if how in ("flip", "cut") and not data:   # already cut to nothing
            continue
        if how == "flip":
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= 1 << draw(st.integers(0, 7))
            messages[i] = bytes(data)
        elif how == "cut":
            messages[i] = bytes(data[:draw(st.integers(0, len(data) - 1))])
        elif how == "twice":
            messages.insert(i, messages[i])
        elif how == "skip" and len(messages) > 1:
            del messages[i]
        elif how == "join" and i + 1 < len(messages):
            messages[i:i + 2] = [messages[i] + messages[i + 1]]
        elif how == "edit":   # one header field of one record set to another value, its crc32c left valid
            starts = _record_starts(bytes(data))
            if starts:
                at = draw(st.sampled_from(starts))
                fields = list(HEADER.unpack_from(data, at))
                f = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 8]))   # every field but the crc
                fields[f] = draw(st.sampled_from([0, 1, fields[f] - 1 if fields[f] else 2, fields[f] + 1, 37, 0x41,
                                                  160, 65535]))
                widths = (0xFF, 0xFF, 0xFFFF, 0xFFFFFFFF, (1 << 64) - 1, 0xFFFF, 0xFFFF, 0xFFFFFFFF, (1 << 64) - 1)
                fields[f] &= widths[f]
                HEADER.pack_into(data, at, *fields)
                messages[i] = bytes(data)
    return messages


def _record_starts(data: bytes) -> list[int]:
    """Where each record's header starts (as framed by the body lengths), while they frame."""
    starts, at = [], 0
    while len(data) - at >= HEADER.size:
        starts.append(at)
        at += HEADER.size + HEADER.unpack_from(data, at)[2]
    return starts


def _outcome(r: Reassembler, feed, messages):
    seen = []
    for pos, data in enumerate(messages, start=1):
        try:
            done = feed(r, data, pos)
        except JournalFormatError as exc:
            seen.append(("error", type(exc).__name__, getattr(exc, "code", None), str(exc)))
            break
        seen.append([(t.kind, t.transfer_id, t.lineage_hash, t.payload, t.body, t.digest) for t in done])
    faults = [(type(f).__name__, getattr(f, "code", None), str(f)) for f in r.faults]
    return seen, faults, r.open_transfers, dict(r._last_id)


@settings(max_examples=300)
@given(journals(), st.booleans())
def test_the_fast_path_is_the_record_path(messages, recovery):
    fast = _outcome(Reassembler(recovery=recovery), Reassembler.feed_message, messages)
    slow = _outcome(Reassembler(recovery=recovery), Reassembler.feed_records, messages)
    assert fast == slow


def test_the_fast_path_takes_a_plain_tick_and_declines_the_rest():
    from aotx.journal.whole import whole_transfers
    e = Emitter(LINEAGES[0], records_per_tick=2)
    e.submit(1, b"x" * 400)            # three records: the first tick leaves it open
    e.submit(1, {"a": 1})
    first, second = e.drain()
    assert whole_transfers(first.data, {}, {}) is None
    one = Emitter(LINEAGES[0], next_transfer_id=9)
    one.submit(1, "plain")
    (tick,) = one.drain()
    got = whole_transfers(tick.data, {}, {})
    assert [(t.transfer_id, t.body) for t in got] == [(9, "plain")]
    assert whole_transfers(tick.data, {}, {LINEAGES[0]: 9}) is None        # not above the last id
    assert whole_transfers(tick.data, {LINEAGES[0]: object()}, {}) is None  # a transfer open on it
