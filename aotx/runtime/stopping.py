"""Stopping background tasks within a bound.

`task.cancel()` is a request: a task can swallow it. On Python 3.11 `asyncio.wait_for` does so when
the cancellation lands just as the awaited operation finishes (a failed NATS connect, a publish
timing out): the task then goes on, and a plain `await task` after cancelling it can wait forever.
`cancel_and_wait` cancels, waits, and cancels again a task that is still running, until every task
is done or the time is up.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Iterable

log = logging.getLogger("aotx.runtime")
STOP_TIMEOUT = 3.0     # seconds a stop waits for its tasks
_FIRST_WAIT = 1.0      # seconds a task may take to finish its own cleanup before it is cancelled again
_RECANCEL = 0.1        # seconds between later cancellations


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None], timeout: float = STOP_TIMEOUT,
                          *, what: str = "task") -> set[asyncio.Task]:
    """Cancel every task and wait until each is done, at most `timeout` seconds. Returns the tasks
    still running then (they are logged). Their exceptions are consumed: a stop does not raise."""
    me = asyncio.current_task()
    pending = {t for t in tasks if t is not None and t is not me and not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    wait = _FIRST_WAIT
    while pending:
        left = deadline - loop.time()
        if left <= 0:
            break
        for task in pending:
            task.cancel()
        done, pending = await asyncio.wait(pending, timeout=min(wait, left))
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.debug("%s ended with %s while stopping", what, type(task.exception()).__name__)
        wait = _RECANCEL
    for task in pending:
        log.warning("%s %s did not end within %.1f s of being cancelled", what, task.get_name(), timeout)
    return pending
