"""SIGTERM/SIGINT for a serving command: stop serving and drain; a second signal hurries the drain.

The drain (api.drain) ends running requests after the grace with their native errors; the HTTP server
waits for their connections `grace + FLUSH_SECONDS` at most. Whatever task is still alive when the
command's coroutine ends is cancelled within a bound here, so `asyncio.run` never waits on one
that swallows its cancellation.
"""
from __future__ import annotations

import asyncio
import logging
import signal

from api.drain import Drain
from aotx.runtime.stopping import cancel_and_wait

log = logging.getLogger("aotx.shutdown")
FLUSH_SECONDS = 3.0     # after the grace: time for the native error events to reach the clients
LEFTOVER_TIMEOUT = 2.0  # seconds for the tasks still alive at the end


def graceful_timeout(grace: float) -> float:
    return max(0.0, grace) + FLUSH_SECONDS


def install_shutdown_signals(stop: asyncio.Event, drain: Drain) -> None:
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            drain.hurry()
            return
        stop.set()
        drain.begin()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)


async def cancel_leftovers() -> None:
    """Cancel every other task of the loop, within LEFTOVER_TIMEOUT."""
    left = await cancel_and_wait(asyncio.all_tasks(), LEFTOVER_TIMEOUT, what="task")
    if left:
        log.warning("%d task(s) still running at exit", len(left))
