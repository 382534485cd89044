"""Opt-in pytest plugin: the CPU each test's phases cost, beside their wall time.

`pytest -p tests.cpu_times tests/...` (one process: not under xdist) prints, after the run, the tests whose
setup + call + teardown took most CPU, and each module's sum. CPU is user + sys of this process (all its
threads) plus that of the child processes it reaped during the phase (`aotx serve`, nats-server, drills: a
child is counted when it is waited for, so a module-scoped server's CPU lands in the teardown that stops it).
On a box shared with other work the wall time moves with the load; the CPU time much less: compare changes
by CPU. `CPU_TIMES_TOP=N` prints N tests (default 40). `CPU_TIMES_FILE=path` also appends one tab-separated
line per test as it ends (wall, self cpu, children cpu, node id): it works under xdist too (each worker
appends its own tests) and keeps what a cut-short run measured.
"""
from __future__ import annotations

import os
import resource
import time
from collections import defaultdict

import pytest

_rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])   # nodeid -> [wall, self cpu, child cpu]


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _measure(item):
    wall0, (me0, kids0) = time.perf_counter(), _cpu()
    try:
        return (yield)
    finally:
        me1, kids1 = _cpu()
        row = _rows[item.nodeid]
        row[0] += time.perf_counter() - wall0
        row[1] += me1 - me0
        row[2] += kids1 - kids0


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
            wall, me, kids = _rows[item.nodeid]
            with open(path, "a") as f:
                f.write(f"{wall:.3f}\t{me:.3f}\t{kids:.3f}\t{item.nodeid}\n")


def pytest_terminal_summary(terminalreporter):
    if not _rows:
        return
    top = int(os.environ.get("CPU_TIMES_TOP", "40"))
    write = terminalreporter.write_line
    write("")
    write(f"CPU per test (setup+call+teardown; wall, cpu = self + reaped children), top {top}:")
    for nodeid, (wall, me, kids) in sorted(_rows.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        write(f"  wall {wall:7.2f}  cpu {me + kids:7.2f} (self {me:6.2f} children {kids:6.2f})  {nodeid}")
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for nodeid, row in _rows.items():
        module = modules[nodeid.split("::", 1)[0]]
        for i in range(3):
            module[i] += row[i]
    write("per module:")
    for path, (wall, me, kids) in sorted(modules.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
        write(f"  wall {wall:7.2f}  cpu {me + kids:7.2f} (self {me:6.2f} children {kids:6.2f})  {path}")
    total = [sum(row[i] for row in modules.values()) for i in range(3)]
    write(f"  wall {total[0]:7.2f}  cpu {total[1] + total[2]:7.2f} (self {total[1]:6.2f} children {total[2]:6.2f})  all")
