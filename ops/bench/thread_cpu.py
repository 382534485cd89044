"""CPU time of a local process, from /proc (Linux; a benchmark helper, not a test): its main thread — the
event loop of `aotx serve` — from the task's `schedstat` (nanoseconds on a CPU), and all its threads
together (the engine's included, and those that ended) from `stat` (utime + stime, in clock ticks of
1/SC_CLK_TCK s: 10 ms). In seconds; None where /proc does not tell."""
from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _on_cpu(path: Path) -> float | None:
    try:
        return int(path.read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def main_thread_cpu(pid: int) -> float | None:
    """Seconds the process's main thread (its event loop) has run on a CPU."""
    return _on_cpu(Path(f"/proc/{pid}/task/{pid}/schedstat"))


def process_cpu(pid: int) -> float | None:
    """Seconds all the process's threads have run on a CPU (user + system; ended threads included)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK   # utime, stime: fields 14 and 15 of stat
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """Main-thread and whole-process CPU seconds of `pid` between `start()` and `stop()`."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._start: tuple[float | None, float | None] = (None, None)

    def _now(self) -> tuple[float | None, float | None]:
        if self.pid is None:
            return None, None
        return main_thread_cpu(self.pid), process_cpu(self.pid)

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> tuple[float | None, float | None]:
        (a0, b0), (a1, b1) = self._start, self._now()
        return (None if a0 is None or a1 is None else a1 - a0), (None if b0 is None or b1 is None else b1 - b0)
