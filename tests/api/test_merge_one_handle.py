"""api.runner.merge_batches over one engine handle (a stream with n=1, the common case): the deltas waiting
in the handle come out in the consumer's own wake-up, with no pump task and no second queue in between."""
from __future__ import annotations

import asyncio

from aotx.engine.request import RequestHandle, deliver
from aotx.engine.types import Delta
from api.runner import merge_batches


def _handle() -> RequestHandle:
    return RequestHandle("r", 3, 8, asyncio.get_running_loop(), lambda: None)


async def test_one_handle_needs_no_task_and_gives_every_waiting_delta_in_one_batch():
    h = _handle()
    for k in range(3):                                   # three steps delivered before the consumer runs
        deliver(asyncio.get_running_loop(), [(h, Delta(f"t{k}", (k,)))])
    stream = merge_batches([h])
    await asyncio.sleep(0)                               # the engine's callbacks run
    before = len(asyncio.all_tasks())
    batch = await stream.__anext__()
    assert [(i, d.text) for i, d in batch] == [(0, "t0"), (0, "t1"), (0, "t2")]
    assert len(asyncio.all_tasks()) == before            # no pump task of its own
    h.put(Delta("end", (9,), finish_reason="stop", prompt_tokens=3, completion_tokens=4))
    assert [d.finish_reason for _, d in await stream.__anext__()] == ["stop"]
    assert h.finish_reason == "stop"
    assert [b async for b in stream] == []              # it ends after the final delta


async def test_one_handle_consumer_waits_for_the_next_step_and_stops_at_the_final_delta():
    h = _handle()
    stream = merge_batches([h])
    waiting = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0)
    assert not waiting.done()
    h.put(Delta("a", (1,)))
    h.put(Delta("b", (2,), finish_reason="length", prompt_tokens=3, completion_tokens=2))
    h.put(Delta("never", (3,)))                          # nothing after a final delta is ever read
    assert [d.text for _, d in await waiting] == ["a", "b"]
    assert [b async for b in stream] == []


async def test_a_closed_stream_leaves_no_task_behind():
    h = _handle()
    stream = merge_batches([h])
    waiting = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await stream.aclose()
    assert len(asyncio.all_tasks()) == 1


async def test_a_reader_cancelled_while_waiting_loses_nothing_and_order_holds():
    h = _handle()
    waiting = asyncio.ensure_future(h.next_batch())
    await asyncio.sleep(0)
    waiting.cancel()                                     # a client gone mid-wait, or a timeout
    await asyncio.gather(waiting, return_exceptions=True)
    h.put(Delta("a", (1,)))
    h.put(Delta("b", (2,)))
    assert (await h.__anext__()).text == "a"             # both ways of reading share one mailbox, in order
    h.put(Delta("c", (3,), finish_reason="stop", prompt_tokens=3, completion_tokens=3))
    assert [d.text for d in await h.next_batch()] == ["b", "c"]
    assert await h.next_batch() == [] and h.finish_reason == "stop"
    assert [d async for d in h] == []


async def test_a_remote_handle_reads_the_same_way():
    from aotx.serving_remote import RemoteHandle

    h = RemoteHandle(None, 7)
    stream = merge_batches([h])
    waiting = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0)
    h.put(Delta("x", (1,)))
    h.put(Delta("", (), finish_reason="length", prompt_tokens=1, completion_tokens=1))
    assert [d.text for _, d in await waiting] == ["x", ""]
    assert h.finish_reason == "length" and [b async for b in stream] == []
