"""CPU seconds of processes, from /proc (Linux): what the benches report beside their rates.

`process_cpu(pid)`: all its threads together (ended ones included), utime + stime from `stat` (clock ticks
of 1/SC_CLK_TCK s: 10 ms), None where /proc does not tell; `cpu_seconds(pid)`: the same, 0.0 once it is
gone; `main_thread_cpu(pid)`: its main thread alone (the event loop of `aotx serve`), from the task's
`schedstat` (nanoseconds on a CPU); `CpuMeter`: both between `start()` and `stop()`; `children(pid)`: the
pids of its direct children (every thread's); `comm(pid)`: its command name ("" once gone); `usage(pid)`:
{"main", "process", "children"} seconds at once (the main thread's from its task `stat`); `delta` of two.
"""
from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_seconds(path: Path) -> float | None:
    try:
        fields = path.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK   # utime, stime: fields 14 and 15 of stat
    except (OSError, ValueError, IndexError):
        return None


def process_cpu(pid: int) -> float | None:
    """Seconds all the process's threads have run on a CPU (user + system; ended threads included)."""
    return _stat_seconds(Path(f"/proc/{pid}/stat"))


def cpu_seconds(pid: int) -> float:
    got = process_cpu(pid)
    return 0.0 if got is None else got


def main_thread_cpu(pid: int) -> float | None:
    """Seconds the process's main thread (its event loop) has run on a CPU."""
    try:
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(k) for k in f.read().split()]
    except FileNotFoundError:
        pass
    return out


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


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


def usage(pid: int) -> dict[str, float]:
    """{"main": the main thread's, "process": all its threads', "children": its live children's} CPU seconds
    (0 where a task is gone): what one request cost the server, beside the wall time it took."""
    def seconds(path: str) -> float:
        return _stat_seconds(Path(path)) or 0.0
    return {"main": seconds(f"/proc/{pid}/task/{pid}/stat"), "process": seconds(f"/proc/{pid}/stat"),
            "children": sum(seconds(f"/proc/{c}/stat") for c in children(pid))}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}
