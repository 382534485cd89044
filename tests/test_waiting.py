"""The shared wait helpers: they answer as soon as the condition holds and fail clearly past the deadline."""
from __future__ import annotations

import asyncio
import itertools

import pytest
from quart import Quart, Response

from tests.waiting import open_stream, wait_until, wait_until_async


def test_wait_until_answers_the_first_answer_that_is_done():
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls), "the third call", done=lambda n: n >= 3) == 3
    assert wait_until(lambda: "ready", "a truthy answer") == "ready"


def test_wait_until_fails_naming_what_and_the_last_answer():
    with pytest.raises(AssertionError, match=r"timed out after 0.2 s waiting for the door to open; "
                                             r"last seen: \{'door': 'shut'\}"):
        wait_until(lambda: {"door": "shut"}, "the door to open", timeout=0.2, done=lambda d: d["door"] == "open")


async def test_wait_until_async_awaits_coroutine_checks_and_fails_clearly():
    calls = itertools.count(1)

    async def check():
        return next(calls)

    assert await wait_until_async(check, "the second call", done=lambda n: n >= 2) == 2
    assert await wait_until_async(lambda: 7, "a plain answer") == 7
    with pytest.raises(AssertionError, match="waiting for nothing; last seen: 0"):
        await wait_until_async(lambda: 0, "nothing", timeout=0.1)


async def test_open_stream_sees_the_start_and_the_events_before_the_end():
    app = Quart("waiting-test")
    gate = asyncio.Event()

    @app.get("/events")
    async def events():
        async def body():
            yield b"data: one\n\n"
            await gate.wait()
            yield b"data: two\n\n"
        return Response(body(), content_type="text/event-stream")

    async with app.test_app() as test_app:
        async with open_stream(test_app.test_client(), "/events?x=1") as stream:
            assert await stream.started() == 200
            await wait_until_async(lambda: "one" in stream.text, "the first event")
            assert "two" not in stream.text
            gate.set()
            assert await stream.finish() == "data: one\n\ndata: two\n\n"
        gate.clear()
        async with open_stream(test_app.test_client(), "/events") as stream:   # left before its end
            await wait_until_async(lambda: "one" in stream.text, "the first event")
