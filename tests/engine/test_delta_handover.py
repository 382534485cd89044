"""DeltaStream's hand-over (aotx/engine/request.py): a reader waiting in `__anext__` gets the next delta as
the result of the future it awaits, without the box; what comes before it runs again waits in the box behind
that one; a reader cancelled while it waited takes nothing; the final delta ends the stream either way."""
from __future__ import annotations

import asyncio

import pytest

from aotx.engine.request import RequestHandle, deliver
from aotx.engine.types import Delta


def _handle() -> RequestHandle:
    return RequestHandle("r", 3, 64, asyncio.get_running_loop(), lambda: None)


async def test_a_waiting_reader_gets_the_delta_then_the_ones_pushed_before_it_ran_in_order():
    h = _handle()
    reader = asyncio.ensure_future(h.__anext__())
    await asyncio.sleep(0)
    h.put_plain("a", (1,), 1)
    h.put(Delta("b", (2,), prompt_tokens=3, completion_tokens=2))
    h.put(Delta("", (), finish_reason="length", prompt_tokens=3, completion_tokens=2))
    first = await reader
    assert first == Delta("a", (1,), prompt_tokens=3, completion_tokens=1) and len(h._box) == 2
    assert [d.text async for d in h] == ["b", ""] and h.finish_reason == "length"
    with pytest.raises(StopAsyncIteration):
        await h.__anext__()


async def test_the_final_delta_handed_over_ends_the_stream():
    h = _handle()
    reader = asyncio.ensure_future(h.__anext__())
    await asyncio.sleep(0)
    h.put(Delta("x", (5,), finish_reason="stop", prompt_tokens=3, completion_tokens=1))
    assert (await reader).finish_reason == "stop" and h.finish_reason == "stop"
    assert [d async for d in h] == [] and h.waiting() == []


async def test_a_reader_cancelled_while_it_waited_leaves_the_delta_for_the_next_one():
    h = _handle()
    reader = asyncio.ensure_future(h.__anext__())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    h.put_plain("kept", (7,), 1)
    assert (await h.__anext__()).text == "kept"


async def test_one_delivery_reaches_each_reader_once_in_the_engines_order():
    """deliver's callback (as the engine thread hands a step over): each handle's waiting reader is handed
    its token, and `waiting` gives what came with it in the same callback."""
    loop = asyncio.get_running_loop()
    hs = [_handle() for _ in range(3)]
    readers = [asyncio.ensure_future(h.__anext__()) for h in hs]
    await asyncio.sleep(0)
    assert deliver(loop, [(hs[0], "p", (1,), 1), (hs[1], "q", (2,), 1), (hs[0], "r", (3,), 2),
                          (hs[2], Delta("", (), finish_reason="cancelled", prompt_tokens=3))])
    got = await asyncio.gather(*readers)
    assert [d.text for d in got] == ["p", "q", ""] and got[2].finish_reason == "cancelled"
    assert [d.text for d in hs[0].waiting()] == ["r"] and hs[1].waiting() == [] and hs[2].finish_reason == "cancelled"
