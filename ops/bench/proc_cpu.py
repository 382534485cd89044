"""CPU seconds a local process spent, from /proc (a benchmark helper, not a test): its main thread (for
`aotx serve`: the event loop), the whole process (with the engine's and the worker threads) and its child
processes (the embedded nats-server, the embedding worker), so a bench can say what one request cost
the server in CPU beside the wall time it took."""
from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat_cpu(path: Path) -> float:
    """utime + stime of a /proc stat file, in seconds (0 where the task is gone)."""
    try:
        fields = path.read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (any of its threads' children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def cpu_seconds(pid: int) -> dict[str, float]:
    """{"main": the main thread's, "process": all its threads', "children": its live children's} CPU s."""
    return {"main": _stat_cpu(Path(f"/proc/{pid}/task/{pid}/stat")), "process": _stat_cpu(Path(f"/proc/{pid}/stat")),
            "children": sum(_stat_cpu(Path(f"/proc/{c}/stat")) for c in children(pid))}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}
