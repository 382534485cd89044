"""Route counters: one cell per (surface, lane), every cell always present."""
from __future__ import annotations

import threading

SURFACES = ("chat", "completions", "messages", "responses", "shared")
LANES = ("buffered", "stream")


class RouteMetrics:
    """Counts requests a wire surface handed to the engine, by surface and lane."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {(s, l): 0 for s in SURFACES for l in LANES}

    def record(self, surface: str, lane: str) -> None:
        key = (surface, lane)
        if key not in self._counts:
            raise ValueError(f"unknown route cell surface={surface!r} lane={lane!r}")
        with self._lock:
            self._counts[key] += 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)
