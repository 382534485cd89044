"""Opening a stream or bucket that another process may be creating at the same moment (issue 15).

Two runtimes (or gateways) that start at once on a fresh journal both create its streams and buckets
(R3 on a cluster). nats-server answers such a JetStream API request late or not at all while the other
client's create is under way: a stream info sent between the stream's assignment and its RAFT group's
first leader gets no answer (nats-py: `nats: timeout` after the request's whole timeout), and the info
read right after a create may answer "not found" from a node that has not applied the assignment yet.
Both pass within milliseconds; asked again, the same request is answered (docs/SCALE.md, "Two runtimes
booting at once"). `set_up` opens again, a bounded number of times; anything else, or the same error
on every attempt, is raised as it came.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, TypeVar

import nats.errors
import nats.js.errors

log = logging.getLogger("aotx.log_setup")
T = TypeVar("T")
ATTEMPTS = 3
PAUSE = 0.05   # seconds between attempts
TRANSIENT = (nats.errors.TimeoutError, asyncio.TimeoutError, nats.js.errors.NotFoundError)


async def set_up(what: str, open_: Callable[[], Awaitable[T]], attempts: int = ATTEMPTS) -> T:
    """`await open_()`, once more after a transient refusal of the JetStream API (at most `attempts`)."""
    for attempt in range(1, attempts + 1):
        try:
            return await open_()
        except TRANSIENT as exc:
            if attempt == attempts:
                raise
            log.info("opening %s: %s (%s); asking again (%d of %d)", what, type(exc).__name__, exc,
                     attempt + 1, attempts)
        await asyncio.sleep(PAUSE)
    raise AssertionError("unreachable")
