"""An observer of applied journal messages that wakes readers waiting on one stored response or key.

`wait(identity, topic, ref, ready, timeout)`: returns at once when `ready()` (the reader's own
check of the acknowledged state: "more than N events, or finished") holds, else after the next
notice for (identity, topic, ref) (aotx.stored.notices) or `timeout` seconds. The check and the
registration happen with no await between them, and the writer notifies synchronously right after it
applied a message, so no notice is missed. A broker of SSE readers can do the same with its own
observer (`runtime.observers.add`) and `aotx.stored.notices(applied.transfers)`.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from ..stored import notices
from .observers import Applied

Ref = tuple[str, str, object]    # (identity, topic, response id | conversation id | (surface, key))


class StoredSignals:
    def __init__(self) -> None:
        self._waiting: dict[Ref, list] = {}    # ref -> [event, readers waiting on it]

    def __call__(self, applied: Applied) -> None:
        if not self._waiting:
            return
        for n in notices(applied.transfers):
            entry = self._waiting.pop((n.identity, n.topic, n.ref), None)
            if entry is not None:
                entry[0].set()

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait(self, identity: str, topic: str, ref: object, ready: Callable[[], bool], timeout: float) -> None:
        if ready():
            return
        key = (identity, topic, ref)
        entry = self._waiting.get(key)
        if entry is None:
            entry = self._waiting[key] = [asyncio.Event(), 0]
        entry[1] += 1
        try:
            await asyncio.wait_for(entry[0].wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            entry[1] -= 1
            if entry[1] == 0 and self._waiting.get(key) is entry:
                del self._waiting[key]
