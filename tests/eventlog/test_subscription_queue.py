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
