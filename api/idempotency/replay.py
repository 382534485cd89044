"""Answers from a key's first attempt: the saved answer again (byte for byte), a live stream followed,
or the honest "interrupted". Every one carries `Idempotent-Replayed: true`.

A finished answer is replayed with its saved status and headers: a buffered one as its exact body, a
stream as its saved events, one by one — from the stored response the key is bound to, when it is
(api.idempotency.bound). A stream still running is followed: its saved events, then
each new one as the journal saves it (wait_key), to its end; if that end is INTERRUPTED, the stream ends
with the surface's own mid-stream error event saying so (api.idempotency.cut). A first attempt that ended INTERRUPTED
(cut by a restart, journalled at boot; or an answer that could not be saved) is a 409 naming the
key: it is never run again under this key, and never answered with a partial answer as if whole.
"""
from __future__ import annotations

import json
from typing import AsyncIterator

from quart import Response

from aotx.stored import KeyEnd, KeyLookup, KeyState
from api.idempotency.bound import bound_answer, follow_bound
from api.idempotency.cut import count_events, cut_event, interrupted
from api.idempotency.gate import KeyGate, Replay
from api.idempotency.header import REPLAYED

SSE = "text/event-stream"


def answer(status: int, headers: dict, body) -> Response:
    """A response with exactly these headers (Content-Type included), streamed when `body` is an iterator."""
    out = dict(headers)
    content_type = out.pop("Content-Type", None) or out.pop("content-type", None)
    response = Response(body, status=status, content_type=content_type, headers=out)
    if not isinstance(body, (bytes, str)):
        response.timeout = None
    return response


async def _saved(chunks: tuple[bytes, ...]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def _follow(gate: KeyGate, found: KeyLookup) -> AsyncIterator[bytes]:
    seen = events = 0
    while True:
        for chunk in found.chunks[seen:]:
            events += count_events(chunk)
            yield chunk
        seen = max(seen, len(found.chunks))
        if found.state is KeyState.FINISHED and found.end is not KeyEnd.COMPLETE:
            yield cut_event(gate.surface, interrupted(), events)   # the 409 of a buffered repeat, in-band
            return
        if found.state is not KeyState.RUNNING:
            return           # finished whole, or gone
        await gate.wait(seen)
        found = await gate.lookup()


async def replay(rep: Replay) -> Response:
    found = rep.lookup
    if found.state is KeyState.FINISHED:
        if found.end is not KeyEnd.COMPLETE:
            raise interrupted()
        headers = {**json.loads(found.headers), REPLAYED: "true"}
        stream = headers.get("Content-Type", "").startswith(SSE)
        if found.bound:
            return answer(found.status or 200, headers, await bound_answer(rep.gate, found.bound, stream))
        return answer(found.status or 200, headers, _saved(found.chunks) if stream else b"".join(found.chunks))
    # running: a stream with at least one saved event (admit_key waited for it)
    follow = follow_bound(rep.gate, found.bound) if found.bound else _follow(rep.gate, found)
    return answer(200, {"Content-Type": SSE, "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                        REPLAYED: "true"}, follow)
