"""GET /v1/responses/{id}?stream=true&starting_after=N: the saved events of a background response
after N (all of them without `starting_after`), then the live run's as they are saved, until it ends.

Every reader gets the same bytes: the events as the run saved them (sequence_number = position), so
a client that lost its connection, or a second client, continues exactly where it was — no gap, no
duplicate. The stream ends after the last event of a finished response (completed, incomplete,
failed, cancelled, or interrupted by a restart: then its saved events end where the run was cut),
and when the server begins closing (shutdown drain: the client resumes with `starting_after`).
While nothing new comes, a comment line keeps the connection open every KEEPALIVE_SECONDS.
"""
from __future__ import annotations

from typing import AsyncIterator, Optional

from quart import Response, current_app, request

from aotx.stored import StoredRefusal
from aotx.stored.port import StoredJournal
from api.drain import Drain, drain_of
from api.errors import ApiError
from api.sse import KEEPALIVE, sse_response
from api.stored_http import own_response

KEEPALIVE_SECONDS = 15.0


def _starting_after() -> Optional[int]:
    raw = request.args.get("starting_after")
    if raw is None:
        return None
    if not raw.isdigit() or not raw.isascii():
        raise ApiError(400, "'starting_after' must be a sequence number (an integer ≥ 0).", param="starting_after")
    return int(raw)


def follow(port: StoredJournal, identity: str, response_id: str, after: Optional[int]) -> AsyncIterator[bytes]:
    """The SSE bytes of the response's events after `after` (all when None), live until it ends."""
    return _follow(port, identity, response_id, after, drain_of(current_app))


async def _follow(port: StoredJournal, identity: str, response_id: str, after: Optional[int],
                  drain: Drain) -> AsyncIterator[bytes]:
    last, waited = (-1 if after is None else after), False
    while True:
        got = await port.reads.response_events(identity, response_id, None if last < 0 else last)
        if isinstance(got, StoredRefusal):   # deleted or expired meanwhile: nothing more to read
            return
        for n, data in got.events:
            yield data
            last = n
        if got.finished:
            return
        if waited and not got.events:        # woken by the timeout (or a cancellation notice)
            yield KEEPALIVE
        if not await drain.race(port.wait_events(identity, response_id, last + 1, KEEPALIVE_SECONDS)):
            return
        waited = True


async def resume_stream(response_id: str) -> Response:
    """The `stream=true` branch of GET /v1/responses/{id}."""
    after = _starting_after()
    port, identity, view = await own_response(response_id)
    if not view.background:
        raise ApiError(400, "Only responses created with 'background': true can be streamed again.",
                       param="stream")
    return sse_response(follow(port, identity, response_id, after))
