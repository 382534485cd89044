"""The gateway's shutdown drain.

On SIGTERM `aotx serve` stops accepting connections (the HTTP server, api.server, closes its listener and idle
keep-alive connections) and begins the drain:

1. draining: a request that still arrives on an open connection answers 503 in its surface's
   native envelope (OpenAI `server_error`, Anthropic `overloaded_error`);
2. grace: requests already running may finish, for at most `grace` seconds (`--shutdown-grace`);
   the drain moves on at once when the engine has nothing left to do;
3. closing: shared SSE streams end cleanly (their clients resume with Last-Event-ID), and the
   engine stops: every request still running ends with the engine's ENGINE_STOPPED error, which
   the stream projectors turn into their surface's native error event and the buffered builders
   into a native 503 response.

A second signal skips what is left of the grace (`hurry`).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

log = logging.getLogger("aotx.drain")
EXT = "aotx_drain"
DEFAULT_GRACE = 3.0      # seconds running requests may take to finish after SIGTERM
_IDLE_POLL = 0.05        # seconds between looks at the engine while the grace runs


class Drain:
    def __init__(self, *, grace: float = DEFAULT_GRACE, busy: Callable[[], bool] = lambda: False,
                 stop_engine: Callable[[], Awaitable[None]] | None = None) -> None:
        self.grace = max(0.0, float(grace))
        self._busy = busy
        self._stop_engine = stop_engine
        self.draining = False
        self._closing: asyncio.Event | None = None
        self._hurry: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    @property
    def closing(self) -> bool:
        return self._closing is not None and self._closing.is_set()

    def _events(self) -> tuple[asyncio.Event, asyncio.Event]:
        if self._closing is None or self._hurry is None:
            self._closing, self._hurry = asyncio.Event(), asyncio.Event()
        return self._closing, self._hurry

    def begin(self) -> None:
        """Start draining (idempotent); on the serving loop."""
        if self._task is None:
            self._events()
            self.draining = True
            self._task = asyncio.get_running_loop().create_task(self._run(), name="aotx-drain")

    def hurry(self) -> None:
        """End the grace now (a second signal)."""
        self._events()[1].set()

    async def finish(self) -> None:
        """Drain (begun now if it was not) and return when it is done."""
        self.begin()
        assert self._task is not None
        await asyncio.shield(self._task)

    async def _run(self) -> None:
        closing, hurry = self._events()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace
        while self._busy() and not hurry.is_set() and loop.time() < deadline:
            try:
                await asyncio.wait_for(hurry.wait(), min(_IDLE_POLL, max(0.0, deadline - loop.time())))
            except asyncio.TimeoutError:
                pass
        if self._busy():
            log.info("shutdown: the grace of %.1f s is over; ending the requests still running", self.grace)
        closing.set()
        if self._stop_engine is not None:
            await self._stop_engine()

    async def race(self, awaitable: Awaitable) -> bool:
        """Await `awaitable` unless the drain begins closing first; False when it did (the
        awaitable is then cancelled)."""
        closing, _ = self._events()
        if closing.is_set():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            return False
        work = asyncio.ensure_future(awaitable)
        closed = asyncio.ensure_future(closing.wait())
        try:
            await asyncio.wait({work, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        if work.cancelled():
            return False
        work.result()
        return True


def drain_of(app) -> Drain:
    """The app's drain (one with no engine until create_app configures it)."""
    drain = app.extensions.get(EXT)
    if drain is None:
        drain = app.extensions[EXT] = Drain()
    return drain
