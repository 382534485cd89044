"""Group commit: one loop per kind of write, every item queued while a round was in flight forms the next.

Used by commands and by execution writes alike. A caller queues an item holding its own future and
awaits it; the loop takes the queue (at most `max_batch` items) and runs one round under the
writer's lock (one writer: rounds of every kind take turns). A round answers its items' futures;
it may hand back items to go first in the next round (commands that wait for another lineage's
pending change). A round that raises fails its unanswered items with that exception (a
cancellation cancels them) and the loop goes on with the next round. A caller that goes away
cancels only its own future, never the loop or the round.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Awaitable, Callable, Generic, Iterable, Optional, Protocol, TypeVar

from .stopping import cancel_and_wait

log = logging.getLogger("aotx.runtime")


class Queued(Protocol):
    future: asyncio.Future


T = TypeVar("T", bound=Queued)
Round = Callable[[list[T]], Awaitable[Optional[Iterable[T]]]]


def answer(items: Iterable[Queued], result: Any) -> None:
    """Set `result` on every item's future not answered yet."""
    for item in items:
        if not item.future.done():
            item.future.set_result(result)


class WriterLock(asyncio.Lock):
    """The writer's one lock, counting the rounds waiting for it (a chain of command rounds lets them in)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0

    async def acquire(self) -> bool:
        self.waiting += 1
        try:
            return await super().acquire()
        finally:
            self.waiting -= 1

    async def acquire_behind(self) -> bool:
        """Acquire without being counted as waiting: a chain of command rounds goes on (the follower's
        applier, whose messages every command round applies in its catch-up anyway)."""
        return await super().acquire()


class GroupCommit(Generic[T]):
    def __init__(self, lock: asyncio.Lock, round_: Round, *, name: str, max_batch: int | None = None) -> None:
        self.lock, self.round, self.name, self.max_batch = lock, round_, name, max_batch
        self._queue: deque[T] = deque()
        self._loop: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self._queue)

    async def submit(self, item: T) -> Any:
        """Queue `item` for the next round and wait for its answer."""
        self._queue.append(item)
        if self._loop is None or self._loop.done():
            self._loop = asyncio.get_running_loop().create_task(self._run())
        return await item.future

    async def _run(self) -> None:
        while self._queue:
            n = len(self._queue) if self.max_batch is None else min(self.max_batch, len(self._queue))
            batch = [self._queue.popleft() for _ in range(n)]
            try:
                async with self.lock:
                    again = await self.round(batch)
            except BaseException as exc:
                for item in batch:
                    if not item.future.done():
                        if isinstance(exc, Exception):
                            item.future.set_exception(exc)
                        else:
                            item.future.cancel()
                if not isinstance(exc, Exception):
                    raise
                log.exception("shared runtime %s round failed", self.name)
                continue
            if again:   # they go first in the next round, in their order
                self._queue.extendleft(reversed(list(again)))

    async def stop(self, result: Any) -> None:
        """Stop the loop (bounded) and answer every item still queued with `result`."""
        await cancel_and_wait([self._loop], what=f"{self.name} writer")
        self._loop = None
        answer(self._queue, result)
        self._queue.clear()
