"""CPU seconds of processes, from /proc (Linux): what the benches report beside their rates.

`cpu_seconds(pid)`: utime + stime of the process (0.0 once it is gone); `children(pid)`: the pids of its
direct children (every thread's); `comm(pid)`: its command name ("" once gone).
"""
from __future__ import annotations

import os


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
