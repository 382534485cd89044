"""The deltas a stream has waiting when it writes go out in one write: every chunk of one engine
step (n choices, several events per delta), and whatever piled up while the client was slow."""
from __future__ import annotations

import json

from aotx.engine.types import Delta
from api.runner import stream_events
from api.surfaces.chat.stream import ChatStreamProjector
from tests.api.fake_service import FakeHandle


def _events(writes: list[bytes]) -> list[str]:
    return [line for w in writes for line in w.decode().split("\n\n") if line]


async def test_deltas_waiting_together_are_one_write_with_every_event_in_order():
    projector = ChatStreamProjector(id="chatcmpl-x", created=0, model="m", fingerprint="fp_x", n=2,
                                    parse_tools=False, include_usage=True, logprobs=False)
    handles = [FakeHandle([Delta("a", (1,)), Delta("b", (2,)), Delta("c", (3,), finish_reason="stop",
                                                                        prompt_tokens=3, completion_tokens=3)], 3)
               for _ in range(2)]
    writes = [w async for w in stream_events(handles, projector)]
    events = _events(writes)
    assert writes[0].count(b"data: ") == 1                       # the opening chunk goes out at once
    assert len(writes) == 2                                       # then everything that was waiting
    texts = {0: "", 1: ""}
    for e in events:
        payload = e.removeprefix("data: ")
        if payload == "[DONE]":
            continue
        for c in json.loads(payload)["choices"]:
            texts[c["index"]] += c["delta"].get("content") or ""
    assert texts == {0: "abc", 1: "abc"} and events[-1] == "data: [DONE]"
    assert json.loads(events[-2].removeprefix("data: "))["usage"]["completion_tokens"] == 6
