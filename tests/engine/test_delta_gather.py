"""DeltaStream.gather (aotx/engine/request.py): a reader that batches what it takes is woken once per
batch — enough text, the final delta, or its deadline — not once per engine step (one loop callback
per step, as aotx.engine.request.deliver hands them over)."""
from __future__ import annotations

import asyncio

from aotx.engine.request import RequestHandle
from aotx.engine.types import Delta


class CountingHandle(RequestHandle):
    """Counts the times a push woke the reader waiting on it (not its deadline's timer)."""

    def __init__(self) -> None:
        super().__init__("r", 3, 64, asyncio.get_running_loop(), lambda: None)
        self.wakes = 0

    def _push(self, delta: Delta) -> None:
        waiting = self._waiter is not None
        super()._push(delta)
        self.wakes += waiting and self._waiter is None


async def _steps(handle: RequestHandle, texts: list[str], finish: str | None = None) -> None:
    """One delta per loop iteration (one engine step each), the last one final when `finish` is given."""
    for i, text in enumerate(texts):
        await asyncio.sleep(0)
        last = finish is not None and i == len(texts) - 1
        handle.put(Delta(text, finish_reason=finish if last else None, completion_tokens=i + 1))


async def test_a_gathering_reader_wakes_once_it_has_enough_text_not_at_every_step():
    h = CountingHandle()
    feeder = asyncio.ensure_future(_steps(h, ["abcd"] * 20))
    got = await h.gather(30)
    assert h.wakes == 1 and sum(len(d.text) for d in got) >= 30 and len(got) == 8
    await feeder
    # what waits already is enough: taken at once, without waiting
    assert len(await h.gather(30)) == 12 and h.wakes == 1


async def test_the_final_delta_wakes_a_gathering_reader_whatever_text_it_wanted():
    h = CountingHandle()
    feeder = asyncio.ensure_future(_steps(h, ["ab", "cd", "e"], finish="stop"))
    got = await h.gather(1000)
    await feeder
    assert [d.text for d in got] == ["ab", "cd", "e"] and h.wakes == 1 and h.finish_reason == "stop"
    assert await h.gather(1000) == []


async def test_a_gathering_reader_wakes_at_its_deadline_with_what_waits_or_at_the_next_delta_after_it():
    loop = asyncio.get_running_loop()
    h = CountingHandle()
    await _steps(h, ["ab", "cd"])
    got = await h.gather(1000, until=loop.time() + 0.05)   # two small deltas wait: taken at the deadline
    assert [d.text for d in got] == ["ab", "cd"] and h.wakes == 0   # (its timer woke it, no push)
    # nothing waits when the deadline passes: the next delta, however small, wakes it
    reader = asyncio.ensure_future(h.gather(1000, until=loop.time() + 0.01))
    await asyncio.sleep(0.05)
    assert not reader.done()
    await _steps(h, ["x"])
    assert [d.text for d in await reader] == ["x"] and h.wakes == 1
    # a deadline already past takes what waits at once
    await _steps(h, ["y"])
    assert [d.text for d in await h.gather(1000, until=loop.time() - 1)] == ["y"] and h.wakes == 1


async def test_a_reader_cancelled_while_gathering_leaves_the_stream_readable():
    h = CountingHandle()
    reader = asyncio.ensure_future(h.gather(1000))
    await asyncio.sleep(0)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await _steps(h, ["ab", "cd"], finish="length")
    assert [d.text for d in await h.next_batch()] == ["ab", "cd"] and await h.next_batch() == []
