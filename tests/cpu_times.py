"""Opt-in pytest plugin: the CPU each test's phases cost, beside their wall time.

`pytest -p tests.cpu_times tests/...` (one process: not under xdist) prints, after the run, the tests whose
setup + call + teardown took most CPU, and each module's sum. CPU is user + sys of this process (all its
threads) plus that of the child processes it reaped during the phase (`aotx serve`, nats-server, drills: a
child is counted when it is waited for, so a module-scoped server's CPU lands in the teardown that stops it).
On a box shared with other work the wall time moves with the load; the CPU time much less: compare changes
by CPU. `CPU_TIMES_TOP=N` prints N tests (default 40). `CPU_TIMES_FILE=path` also appends one tab-separated
line per test as it ends (wall, self cpu, children cpu, node id, live-server cpu, the end's Unix time, the
xdist worker): it works under xdist too (each worker appends its own tests), keeps what a cut-short run
measured, and gives each worker's timeline (when it ran what, when it went idle at the end).

Live servers: a server that outlives the phase (the session's `aotx serve`, a module's) is not reaped
during it, so its CPU would only show in the teardown that stops it. For every tests.server_process
ServerProcess alive at both ends of a phase, its CPU and that of its descendants (nats-server) is read from
/proc before and after: the "server" column. It is not in "cpu" (a module-scoped server's whole CPU lands
again in "children" when it is reaped).
"""
from __future__ import annotations

import os
import resource
import time
from collections import defaultdict

import pytest

_rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])   # nodeid -> [wall, self, children, server]
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its live descendants (and of the children each has reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total = sum(int(x) for x in fields[11:15]) / _TICK      # utime stime cutime cstime
        kids = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += f.read().split()
    except OSError:   # the process ended meanwhile
        return 0.0
    return total + sum(_tree_cpu(int(k)) for k in kids)


def _servers() -> dict[int, float]:
    try:
        from tests.server_process import ServerProcess
    except ImportError:
        return {}
    return {s.proc.pid: _tree_cpu(s.proc.pid) for s in list(ServerProcess.live) if s.proc and s.proc.poll() is None}


def _measure(item):
    wall0, (me0, kids0), live0 = time.perf_counter(), _cpu(), _servers()
    try:
        return (yield)
    finally:
        me1, kids1 = _cpu()
        live1 = _servers()
        row = _rows[item.nodeid]
        row[0] += time.perf_counter() - wall0
        row[1] += me1 - me0
        row[2] += kids1 - kids0
        row[3] += sum(live1[pid] - live0[pid] for pid in live1.keys() & live0.keys())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _measure(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _measure(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield from _measure(item))
    finally:
        path = os.environ.get("CPU_TIMES_FILE")
        if path:
            wall, me, kids, live = _rows[item.nodeid]
            with open(path, "a") as f:
                f.write(f"{wall:.3f}\t{me:.3f}\t{kids:.3f}\t{item.nodeid}\t{live:.3f}\t{time.time():.3f}\t"
                        f"{os.environ.get('PYTEST_XDIST_WORKER', '-')}\n")


def pytest_terminal_summary(terminalreporter):
    if not _rows:
        return
    top = int(os.environ.get("CPU_TIMES_TOP", "40"))
    write = terminalreporter.write_line
    write("")
    write(f"CPU per test (setup+call+teardown; wall, cpu = self + reaped children), top {top}:")
    for nodeid, (wall, me, kids, live) in sorted(_rows.items(), key=lambda kv: -(kv[1][1] + kv[1][2] + kv[1][3]))[:top]:
        write(f"  wall {wall:7.2f}  cpu {me + kids:7.2f} (self {me:6.2f} children {kids:6.2f})  server {live:6.2f}"
              f"  {nodeid}")
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for nodeid, row in _rows.items():
        module = modules[nodeid.split("::", 1)[0]]
        for i in range(4):
            module[i] += row[i]
    write("per module:")
    for path, (wall, me, kids, live) in sorted(modules.items(), key=lambda kv: -(kv[1][1] + kv[1][2] + kv[1][3])):
        write(f"  wall {wall:7.2f}  cpu {me + kids:7.2f} (self {me:6.2f} children {kids:6.2f})  server {live:6.2f}"
              f"  {path}")
    total = [sum(row[i] for row in modules.values()) for i in range(4)]
    write(f"  wall {total[0]:7.2f}  cpu {total[1] + total[2]:7.2f} (self {total[1]:6.2f} children {total[2]:6.2f})"
          f"  server {total[3]:6.2f}  all")
