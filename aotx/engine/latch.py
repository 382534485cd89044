"""A one-shot event for the token masks' hand-overs (aotx.engine.masks)."""
from __future__ import annotations

import threading


class Latch:
    """A one-shot threading.Event (set once, never cleared; wait without a timeout), built in a tenth of its
    instructions: a LateMask makes two a step on the engine thread (threading.Event builds a Condition and
    its bound methods). The one setter takes the token (list.pop: atomic under the GIL) and releases the lock
    that waiters acquire and release again."""
    __slots__ = ("_token", "_lock")

    def __init__(self) -> None:
        self._token = [True]
        self._lock = threading.Lock()
        self._lock.acquire()

    def is_set(self) -> bool:
        return not self._token

    def set(self) -> None:
        try:
            self._token.pop()
        except IndexError:      # (set already)
            return
        self._lock.release()

    def wait(self) -> None:
        if self._token:
            self._lock.acquire()
            self._lock.release()
