"""When `aotx serve --http-workers N` starts a dead HTTP worker again: backoff, and a crash loop's end.

A worker that exits while the server is not stopping is started again after a backoff that doubles with
each recent exit of that worker (FIRST_DELAY, 2x, 4x ... at most MAX_DELAY); LOOP_EXITS exits of one
worker within LOOP_WINDOW seconds are a crash loop: that worker is not started again (the others keep
serving). Pure: the clock is passed in.
"""
from __future__ import annotations

from collections import deque

FIRST_DELAY = 0.5    # seconds before the first restart
MAX_DELAY = 8.0      # seconds: the backoff's ceiling
LOOP_EXITS = 5       # exits of one worker ...
LOOP_WINDOW = 30.0   # ... within this many seconds: a crash loop, no more restarts


class RestartPolicy:
    def __init__(self, *, first: float = FIRST_DELAY, ceiling: float = MAX_DELAY, loop_exits: int = LOOP_EXITS,
                 window: float = LOOP_WINDOW) -> None:
        self.first, self.ceiling, self.loop_exits, self.window = first, ceiling, loop_exits, window
        self._exits: deque[float] = deque()

    def exited(self, now: float) -> float | None:
        """One exit at `now` (monotonic seconds): the delay before the restart, or None (a crash loop)."""
        self._exits.append(now)
        while self._exits and now - self._exits[0] > self.window:
            self._exits.popleft()
        recent = len(self._exits)
        if recent >= self.loop_exits:
            return None
        return min(self.ceiling, self.first * 2 ** (recent - 1))
