"""Runs of items put into and taken from an asyncio.Queue at once, with the queue's own bookkeeping.

A subscription's queue (nats-py's `_pending_queue`) is filled by our parser a read's messages at a time
(eventlog.nats_parser) and emptied by our subscription a run at a time (eventlog.jetstream). `put_nowait`,
`get_nowait` and `task_done` per item are three Python calls each (~8k instructions an item together);
`put_run` / `take_run` leave the queue exactly as those calls would — the same items in the same order,
its unfinished-task count and `join` event, the waiters woken — with one call a run. They use the
queue's documented-by-source attributes (`_queue`, `_unfinished_tasks`, `_finished`, `_getters`,
`_putters`, `_wakeup_next`: CPython 3.8–3.13); where a Python lacks any of them, the public calls are made
item by item (the same result).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

_INTERNALS = ("_queue", "_unfinished_tasks", "_finished", "_getters", "_putters", "_wakeup_next")


_FAST = all(hasattr(asyncio.Queue(), a) for a in _INTERNALS)   # (this Python's queue has them)


def _has_internals(queue: asyncio.Queue) -> bool:
    return _FAST and queue.__class__ is asyncio.Queue and not getattr(queue, "_is_shutdown", False)


def room(queue: asyncio.Queue) -> int:
    """How many items the queue takes now before it is full (a large number where it is unbounded)."""
    size = queue.maxsize
    return size - queue.qsize() if size > 0 else 1 << 62


def put_run(queue: asyncio.Queue, items: Sequence[Any]) -> None:
    """`put_nowait` of each item, in order (the caller has checked there is room: `room`)."""
    if not items:
        return
    if not _has_internals(queue):
        for item in items:
            queue.put_nowait(item)
        return
    queue._queue.extend(items)   # type: ignore[attr-defined]
    queue._unfinished_tasks += len(items)   # type: ignore[attr-defined]
    queue._finished.clear()   # type: ignore[attr-defined]
    getters = queue._getters   # type: ignore[attr-defined]
    for _ in range(len(items)):   # (put_nowait wakes one getter an item)
        if not getters:
            break
        queue._wakeup_next(getters)   # type: ignore[attr-defined]


def take_run(queue: asyncio.Queue, limit: int, stop: Any = None) -> list[Any]:
    """`get_nowait` then `task_done` of up to `limit` items waiting now, in order; an item that `is stop`
    is taken and ends the run (not returned)."""
    out: list[Any] = []
    if not _has_internals(queue):
        while len(out) < limit and not queue.empty():
            item = queue.get_nowait()
            queue.task_done()
            if item is stop and stop is not None:
                break
            out.append(item)
        return out
    items = queue._queue   # type: ignore[attr-defined]
    taken = 0
    while items and taken < limit:
        item = items.popleft()
        taken += 1
        if item is stop and stop is not None:
            break
        out.append(item)
    if taken:
        putters = queue._putters   # type: ignore[attr-defined]
        for _ in range(taken):   # (get_nowait wakes one putter an item)
            if not putters:
                break
            queue._wakeup_next(putters)   # type: ignore[attr-defined]
        left = queue._unfinished_tasks - taken   # type: ignore[attr-defined]
        if left < 0:
            raise ValueError("task_done() called too many times")
        queue._unfinished_tasks = left   # type: ignore[attr-defined]
        if left == 0:
            queue._finished.set()   # type: ignore[attr-defined]
    return out
