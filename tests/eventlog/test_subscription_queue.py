"""A JetStream subscription hands the messages already waiting in nats-py's queue straight from it
(eventlog.jetstream.JetStreamSubscription: no task and asyncio.wait per message), the same messages in
the same order as nats-py's iterator, then waits on that queue itself for the next ones (never through
nats-py's iterator), and ends as the iterator does once closed, a wait in progress included."""
from __future__ import annotations

import asyncio

from eventlog import BatchMessage, JetStreamRecorder, StreamSpec


async def _until(condition, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_waiting_messages_come_from_the_queue_in_order_then_the_iterator_follows(nats_server):
    spec = StreamSpec(name="SUBQUEUE", subject_prefix="subqueue.j")
    rec = await JetStreamRecorder.connect(nats_server.client_url(), spec)
    try:
        subjects = [spec.subject(f"l{i % 3}", "t") for i in range(50)]
        await rec.append_batch([BatchMessage(s, b"m%d" % i, f"id{i}") for i, s in enumerate(subjects)])
        sub = await rec.subscribe(1)
        await _until(lambda: sub._queue.qsize() == 50)   # every message delivered, none taken yet
        waited = []
        real = sub._messages

        class Counting:   # counts what goes through nats-py's iterator
            async def __anext__(self):
                waited.append(1)
                return await real.__anext__()

        sub._messages = Counting()
        got = [await asyncio.wait_for(sub.__anext__(), 5) for _ in range(50)]
        assert [(m.seq, m.subject, m.data, m.headers["Nats-Msg-Id"]) for m in got] == \
            [(i + 1, s, b"m%d" % i, f"id{i}") for i, s in enumerate(subjects)]
        assert waited == [] and sub._sub.pending_bytes == 0 and sub._queue.empty()
        nxt = asyncio.ensure_future(sub.__anext__())   # nothing waiting: a wait on the queue
        await rec.append(subjects[0], b"late")
        late = await asyncio.wait_for(nxt, 5)
        assert (late.seq, late.data) == (51, b"late") and waited == [] and sub._sub.pending_bytes == 0
        waiting = asyncio.ensure_future(sub.__anext__())   # a wait in progress ends with the subscription
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await sub.close()
        try:
            await asyncio.wait_for(waiting, 5)
            raise AssertionError("a closed subscription handed a message")
        except StopAsyncIteration:
            pass
        ended = asyncio.ensure_future(sub.__anext__())
        try:
            await asyncio.wait_for(ended, 5)
            raise AssertionError("a closed subscription handed a message")
        except StopAsyncIteration:
            pass
    finally:
        await rec.close()


async def test_an_ordered_consumers_messages_are_queued_as_the_stored_messages_nats_py_s_path_makes(nats_server):
    """Client.deliver_stored (eventlog.nats_client): a followed subscription's data messages are queued as
    StoredMessages by our Client itself; they equal what nats-py's own path (a Msg, then `_stored`) gives for
    the same messages, headers included (or left empty where the reader asked for none), and the ordered
    consumer's bookkeeping (its sequences, the flow-control count and last reply, the pending bytes) is
    nats-py's."""
    from nats.aio.msg import Msg

    from eventlog import StoredMessage
    spec = StreamSpec(name="SUBSTORED", subject_prefix="substored.j")
    rec = await JetStreamRecorder.connect(nats_server.client_url(), spec)
    try:
        subjects = [spec.subject(f"l{i % 4}", "t") for i in range(40)]
        await rec.append_batch([BatchMessage(s, b"m%d" % i * (i + 1), f"id{i}") for i, s in enumerate(subjects[:30])])
        for i, s in enumerate(subjects[30:], 30):   # (single appends: their headers differ from a batch's)
            await rec.append(s, b"m%d" % i, msg_id=f"id{i}", expected_last_subject_seq=None)
        fast = await rec.subscribe(1)
        bare = await rec.subscribe(1, headers=False)
        theirs = await rec.subscribe(1)
        del theirs._core._aotx_stored   # (no await since it was made: nothing delivered yet) nats-py's path
        await _until(lambda: all(s._queue.qsize() == 40 for s in (fast, bare, theirs)))
        assert {type(m) for m in fast._queue._queue} == {StoredMessage} == {type(m) for m in bare._queue._queue}
        assert {type(m) for m in theirs._queue._queue} == {Msg}
        got = {name: [await asyncio.wait_for(s.__anext__(), 5) for _ in range(40)]
               for name, s in (("fast", fast), ("bare", bare), ("theirs", theirs))}
        assert got["fast"] == got["theirs"] and got["fast"][0].headers["Nats-Msg-Id"] == "id0"
        assert [(m.seq, m.subject, m.data) for m in got["bare"]] == [(m.seq, m.subject, m.data) for m in got["theirs"]]
        assert all(m.headers == {} for m in got["bare"])
        for s in (fast, bare, theirs):
            jsi = s._core._jsi
            assert (jsi._dseq, jsi._sseq, jsi._fciseq, s._core._pending_size) == (41, 40, 40, 0)
            assert jsi._cmeta.startswith("$JS.ACK.SUBSTORED.") and jsi._cmeta.split(".")[5:7] == ["40", "40"]
        late = asyncio.ensure_future(fast.__anext__())   # then following: a message stored later
        await rec.append(subjects[0], b"late")
        assert (await asyncio.wait_for(late, 5)).seq == 41
        for s in (fast, bare, theirs):
            await s.close()
    finally:
        await rec.close()
