"""The Recorder contract, written once and run against every implementation."""

from __future__ import annotations

import asyncio

import pytest

from eventlog import Ack, BatchMessage, ConcurrencyConflict, JournalFull, JournalHold, Recorder

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _read_all(rec, from_seq=1, subject=None):
    return [m async for m in rec.read(from_seq, subject)]


async def test_is_a_recorder(open_recorder):
    o = await open_recorder()
    assert isinstance(o.recorder, Recorder)


async def test_append_then_read_back_in_order(open_recorder):
    o = await open_recorder()
    subjects = [o.subject("a"), o.subject("b"), o.subject("a", "x")]
    acks = [await o.recorder.append(subjects[i % 3], f"m{i}".encode()) for i in range(10)]
    assert [a.seq for a in acks] == list(range(1, 11))
    assert all(isinstance(a, Ack) and not a.duplicate for a in acks)
    got = await _read_all(o.recorder)
    assert [m.seq for m in got] == list(range(1, 11))
    assert [m.data for m in got] == [f"m{i}".encode() for i in range(10)]
    assert [m.subject for m in got] == [subjects[i % 3] for i in range(10)]
    assert [m.seq for m in await _read_all(o.recorder, 7)] == [7, 8, 9, 10]
    assert [m.seq for m in await _read_all(o.recorder, 11)] == []
    only_a = await _read_all(o.recorder, 1, o.subject("a"))
    assert [m.seq for m in only_a] == [1, 4, 7, 10]


async def test_read_of_empty_log_is_empty(open_recorder):
    o = await open_recorder()
    assert await _read_all(o.recorder) == []


async def test_dedup_by_msg_id(open_recorder):
    o = await open_recorder()
    first = await o.recorder.append(o.subject("a"), b"one", msg_id="op-1")
    again = await o.recorder.append(o.subject("a"), b"one", msg_id="op-1")
    other = await o.recorder.append(o.subject("a"), b"two", msg_id="op-2")
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    assert (other.seq, other.duplicate) == (2, False)
    got = await _read_all(o.recorder)
    assert [m.data for m in got] == [b"one", b"two"]
    assert got[0].headers.get("Nats-Msg-Id") == "op-1"


async def test_optimistic_concurrency(open_recorder):
    o = await open_recorder()
    a, b = o.subject("a"), o.subject("b")
    assert (await o.recorder.append(a, b"1", expected_last_subject_seq=0)).seq == 1
    assert (await o.recorder.append(b, b"2", expected_last_subject_seq=0)).seq == 2
    with pytest.raises(ConcurrencyConflict) as info:
        await o.recorder.append(a, b"lost race", expected_last_subject_seq=0)
    assert info.value.subject == a and info.value.expected == 0
    with pytest.raises(ConcurrencyConflict):
        await o.recorder.append(a, b"stale", expected_last_subject_seq=2)
    assert (await o.recorder.append(a, b"3", expected_last_subject_seq=1)).seq == 3
    assert [m.data for m in await _read_all(o.recorder)] == [b"1", b"2", b"3"]


async def test_two_writers_never_interleave_a_subject(open_recorder):
    o = await open_recorder()
    subject = o.subject("a")

    async def writer(name: bytes, expected: int):
        try:
            return await o.recorder.append(subject, name, expected_last_subject_seq=expected)
        except ConcurrencyConflict:
            return None

    results = await asyncio.gather(writer(b"w1", 0), writer(b"w2", 0))
    assert sum(r is not None for r in results) == 1
    assert len(await _read_all(o.recorder)) == 1


async def test_subscribe_replays_then_follows(open_recorder):
    o = await open_recorder()
    for i in range(3):
        await o.recorder.append(o.subject("a"), f"old{i}".encode())
    sub = await o.recorder.subscribe(2)
    try:
        got = [await asyncio.wait_for(sub.__anext__(), 5) for _ in range(2)]
        assert [(m.seq, m.data) for m in got] == [(2, b"old1"), (3, b"old2")]
        await o.recorder.append(o.subject("b"), b"new")
        live = await asyncio.wait_for(sub.__anext__(), 5)
        assert (live.seq, live.data, live.subject) == (4, b"new", o.subject("b"))
    finally:
        await sub.close()


async def test_stream_info(open_recorder):
    o = await open_recorder(max_bytes=1 << 20)
    before = await o.recorder.stream_info()
    await o.recorder.append(o.subject("a"), b"x" * 100)
    after = await o.recorder.stream_info()
    assert after.name == o.spec.name and after.created == before.created
    assert (after.messages, after.last_seq, after.first_seq) == (1, 1, 1)
    assert after.bytes > 100 and after.max_bytes == 1 << 20


async def test_max_bytes_holds_then_lifts_when_space_returns(open_recorder):
    o = await open_recorder(max_bytes=4096)
    payload = b"p" * 200
    appended = 0
    with pytest.raises(JournalFull) as info:
        for _ in range(100):
            await o.recorder.append(o.subject("a"), payload)
            appended += 1
    assert isinstance(info.value, JournalHold)
    assert 0 < appended < 100
    status = await o.recorder.stream_info()
    assert status.messages == appended  # the refused write changed nothing
    with pytest.raises(JournalFull):
        await o.recorder.append(o.subject("a"), payload)
    assert [m.seq for m in await _read_all(o.recorder)] == list(range(1, appended + 1))  # reads work
    await o.recorder.purge()
    ack = await o.recorder.append(o.subject("a"), payload)
    assert ack.seq == appended + 1 and not ack.duplicate


# ---- append_batch: one atomic batch across subjects (JetStream atomic publish, ADR-50) ----------
def _msg(subject, data, msg_id=None, expected=None):
    from eventlog import BatchMessage
    return BatchMessage(subject, data, msg_id=msg_id, expected_last_subject_seq=expected)


async def test_batch_lands_whole_with_consecutive_sequences_and_headers(open_recorder):
    o = await open_recorder()
    a, b = o.subject("a"), o.subject("b")
    assert o.recorder.atomic_batches is True and o.recorder.batch_limit >= 1000
    await o.recorder.append(a, b"0")
    acks = await o.recorder.append_batch([_msg(a, b"1", "m1", 1), _msg(b, b"2", "m2", 0), _msg(a, b"3", "m3")])
    assert [(x.seq, x.duplicate) for x in acks] == [(2, False), (3, False), (4, False)]
    assert all(x.stream == o.spec.name for x in acks)
    got = await _read_all(o.recorder)
    assert [(m.seq, m.subject, m.data) for m in got] == [(1, a, b"0"), (2, a, b"1"), (3, b, b"2"), (4, a, b"3")]
    assert [m.headers.get("Nats-Msg-Id") for m in got[1:]] == ["m1", "m2", "m3"]
    assert await o.recorder.append_batch([]) == []
    # the guard chains on from the batch: a's last message is now 4
    assert (await o.recorder.append(a, b"5", expected_last_subject_seq=4)).seq == 5


async def test_batch_one_wrong_guard_rejects_all_of_it(open_recorder):
    o = await open_recorder()
    a, b, c = o.subject("a"), o.subject("b"), o.subject("c")
    await o.recorder.append(a, b"0")
    with pytest.raises(ConcurrencyConflict):
        await o.recorder.append_batch([_msg(c, b"1", "x1", 0), _msg(a, b"2", "x2", 0), _msg(b, b"3", "x3", 0)])
    assert [m.seq for m in await _read_all(o.recorder)] == [1]
    # nothing of it counted: the same message ids and guards land in the next batch
    acks = await o.recorder.append_batch([_msg(c, b"1", "x1", 0), _msg(a, b"2", "x2", 1)])
    assert [x.seq for x in acks] == [2, 3]


async def test_batch_guards_a_subject_once(open_recorder):
    o = await open_recorder()
    a = o.subject("a")
    with pytest.raises(ValueError):
        await o.recorder.append_batch([_msg(a, b"1", expected=0), _msg(a, b"2", expected=1)])
    assert await _read_all(o.recorder) == []


async def test_batch_with_a_stored_message_id_is_refused_whole(open_recorder):
    from eventlog import DuplicateInBatch
    o = await open_recorder()
    a, b = o.subject("a"), o.subject("b")
    await o.recorder.append(a, b"0", msg_id="seen")
    with pytest.raises(DuplicateInBatch):
        await o.recorder.append_batch([_msg(b, b"1", "new"), _msg(a, b"2", "seen")])
    with pytest.raises(DuplicateInBatch):
        await o.recorder.append_batch([_msg(b, b"1", "twice"), _msg(a, b"2", "twice")])
    assert [m.seq for m in await _read_all(o.recorder)] == [1]


async def test_batch_over_the_limit_is_refused(open_recorder):
    from eventlog import BatchTooLarge
    o = await open_recorder()
    n = o.recorder.batch_limit + 1
    with pytest.raises(BatchTooLarge):
        await o.recorder.append_batch([_msg(o.subject(f"s{i}"), b"x") for i in range(n)])
    assert await _read_all(o.recorder) == []


async def test_batch_that_does_not_fit_stores_nothing(open_recorder):
    o = await open_recorder(max_bytes=4096)
    a = o.subject("a")
    with pytest.raises(JournalFull):
        await o.recorder.append_batch([_msg(o.subject(f"s{i}"), b"p" * 600) for i in range(8)])
    assert (await o.recorder.stream_info()).messages == 0
    acks = await o.recorder.append_batch([_msg(a, b"p" * 600), _msg(a, b"q" * 600)])
    assert [x.seq for x in acks] == [1, 2]


async def test_read_spans_many_batches_in_order_and_stops_at_what_existed(open_recorder):
    o = await open_recorder()
    subjects = [o.subject(f"s{i % 5}") for i in range(2300)]
    for i in range(0, 2300, 100):
        await o.recorder.append_batch([BatchMessage(s, f"m{i + j}".encode(), f"id{i + j}")
                                       for j, s in enumerate(subjects[i:i + 100])])
    got = []
    async for m in o.recorder.read(7):
        got.append(m)
        if len(got) == 1:   # appended during the read: not part of it
            await o.recorder.append(o.subject("late"), b"late")
    assert [m.seq for m in got] == list(range(7, 2301))
    assert got[0].data == b"m6" and got[-1].headers.get("Nats-Msg-Id") == "id2299"
    assert "Nats-Sequence" not in got[0].headers
    only = [m.seq async for m in o.recorder.read(1, o.subject("s3"))]
    assert only == list(range(4, 2301, 5))
    assert [m.data async for m in o.recorder.read(1, o.spec.subject("late", "t"))] == [b"late"]
    assert [m async for m in o.recorder.read(2302)] == []


async def test_read_batches_is_read_of_every_subject_in_lists(open_recorder):
    o = await open_recorder()
    subjects = [o.subject(f"s{i % 3}") for i in range(2300)]
    for i in range(0, 2300, 100):
        await o.recorder.append_batch([BatchMessage(s, f"m{i + j}".encode(), f"id{i + j}")
                                       for j, s in enumerate(subjects[i:i + 100])])
    for start in (1, 999, 1001, 2300, 2301):
        lists = [b async for b in o.recorder.read_batches(start)]
        assert all(isinstance(b, list) and b for b in lists)
        assert [m for b in lists for m in b] == [(m.subject, m.seq, m.data) async for m in o.recorder.read(start)]
