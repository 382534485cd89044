"""The retry policy of unknown outcomes: no HTTP answer, 429 (journal hold) or 503 (runtime away) says
nothing about whether a command landed, so the exact same request is sent again until a definitive
answer or a deadline."""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Awaitable, Callable

from .client import Answer, TransportError
from .violation import ScenarioViolation

UNKNOWN_STATUSES = (429, 503)


async def definitive(call: Callable[[], Awaitable[Answer]], what: str, deadline_s: float, stats: Counter,
                     on_unknown: Callable[[str], None] | None = None) -> Answer:
    """Call until the answer is definitive (not 429/503, no transport error), backing off from 20 ms
    to 0.5 s; each unknown answer counts in stats["unknown_answers"]; past `deadline_s` a violation."""
    deadline = time.monotonic() + deadline_s
    delay = 0.02
    while True:
        try:
            answer = await call()
            if answer.status not in UNKNOWN_STATUSES:
                return answer
            why = f"{answer.status} {answer.body}"
        except TransportError as exc:
            why = str(exc)
        stats["unknown_answers"] += 1
        if on_unknown:
            on_unknown(why)
        if time.monotonic() >= deadline:
            raise ScenarioViolation(f"{what}: no definitive answer within {deadline_s}s: {why}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


__all__ = ["UNKNOWN_STATUSES", "definitive"]
