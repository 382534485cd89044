"""Every path that takes engine handles gives them back, even a stream never read."""
from __future__ import annotations

import gc

from aotx.engine.types import Delta
from api.runner import stream_events
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
