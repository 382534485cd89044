"""Every path that takes engine handles gives them back, even a stream never read."""
from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from aotx.engine.request import RequestHandle
from aotx.engine.types import Delta
from api.errors import ApiError
from api.runner import cancel_all, collect, stream_events
from api.surfaces.chat.stream import ChatStreamProjector
from tests.api.fake_service import FakeHandle


def _projector():
    return ChatStreamProjector(id="chatcmpl-x", created=0, model="m", fingerprint="fp_x", n=1,
                               parse_tools=False, include_usage=False, logprobs=False)


def test_stream_dropped_before_first_read_cancels_its_handles():
    handles = [FakeHandle([Delta("hi", finish_reason="stop")], 3)]
    events = stream_events(handles, _projector())
    del events
    gc.collect()
    assert handles[0].cancelled


async def test_stream_closed_midway_cancels_its_handles():
    handles = [FakeHandle([Delta("a"), Delta("b"), Delta("c", finish_reason="stop")], 3)]
    events = stream_events(handles, _projector())
    await events.__anext__()
    await events.aclose()
    assert handles[0].cancelled


class _Failing:
    """A handle whose stream raises once `after` deltas were read (the engine failing mid-request)."""

    def __init__(self, deltas, error: Exception, request_id: str = "req-failing"):
        self.inner = FakeHandle(deltas, 3)
        self.error, self.request_id, self.prompt_tokens = error, request_id, 3

    @property
    def cancelled(self) -> bool:
        return self.inner.cancelled

    def cancel(self):
        self.inner.cancel()

    async def _gen(self):
        async for delta in self.inner:
            yield delta
        raise self.error

    def __aiter__(self):
        return self._gen()


def test_a_cancel_that_raises_is_logged_and_the_other_handles_are_still_cancelled(caplog):
    def refuse():
        raise RuntimeError("the engine's inbox is gone")

    refusing = RequestHandle("req-refusing", 3, 8, asyncio.new_event_loop(), on_cancel=refuse)
    other = FakeHandle([Delta("a", finish_reason="stop")], 3)
    with caplog.at_level(logging.ERROR, logger="aotx.runner"):
        cancel_all([refusing, other])
    assert other.cancelled
    [record] = [r for r in caplog.records if r.name == "aotx.runner"]
    assert record.exc_info and record.exc_info[0] is RuntimeError
    assert record.fields == {"request_id": "req-refusing"}


async def test_a_stream_whose_engine_raises_ends_with_an_error_event_and_logs_the_cause(caplog):
    handles = [_Failing([Delta("a")], ValueError("a kernel fault"))]
    with caplog.at_level(logging.ERROR, logger="aotx.runner"):
        body = b"".join([chunk async for chunk in stream_events(handles, _projector())])
    assert b"generation failed: a kernel fault" in body
    [record] = [r for r in caplog.records if r.name == "aotx.runner"]
    assert record.exc_info and record.exc_info[0] is ValueError
    assert record.fields == {"request_ids": ["req-failing"]}
    assert handles[0].cancelled


async def test_a_buffered_request_whose_engine_raises_answers_500_and_logs_the_cause(caplog):
    handles = [_Failing([Delta("a")], ValueError("a kernel fault"))]
    with caplog.at_level(logging.ERROR, logger="aotx.runner"), pytest.raises(ApiError) as refused:
        await collect(handles)
    assert refused.value.status == 500 and "a kernel fault" in refused.value.message
    [record] = [r for r in caplog.records if r.name == "aotx.runner"]
    assert record.exc_info and record.exc_info[0] is ValueError
    assert record.fields == {"request_ids": ["req-failing"]}
