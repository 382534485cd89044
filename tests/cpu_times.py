"""Opt-in pytest plugin: the CPU each test's phases cost, beside their wall time.

`pytest -p tests.cpu_times tests/...` (one process: not under xdist) prints, after the run, the tests whose
setup + call + teardown took most CPU, and each module's sum. CPU is user + sys of this process (all its
threads) plus that of the child processes it reaped during the phase (`aotx serve`, nats-server, drills: a
child is counted when it is waited for, so a module-scoped server's CPU lands in the teardown that stops it).
On a box shared with other work the wall time moves with the load; the CPU time much less: compare changes
by CPU. `CPU_TIMES_TOP=N` prints N tests (default 40). `CPU_TIMES_FILE=path` also appends one tab-separated
line per test as it ends (wall, self cpu, children cpu, node id, live-server cpu, the end's Unix time, the
xdist worker): it works under xdist too (each worker appends its own tests), keeps what a cut-short run
measured, and gives each worker's timeline: `python -m tests.cpu_times FILE` prints when each worker started
and ended, its busy time and CPU, and the CPU the tests asked for in each 30 s of the run (in cores: near 2
on the 2-core box where the run was CPU-bound, lower where every worker waited or at the tail).

Live servers: a server that outlives the phase (the session's `aotx serve`, a module's) is not reaped
during it, so its CPU would only show in the teardown that stops it. For every tests.server_process
ServerProcess alive at both ends of a phase, its CPU and that of its descendants (nats-server) is read from
/proc before and after: the "server" column. When such a server is stopped and reaped, what "server" already
counted of it is taken out of that test's "children", so that cpu + server adds up over a run (a test's
"children" can then be slightly negative, where a descendant's CPU was never reaped by the server).
"""
from __future__ import annotations

import os
import resource
import time
from collections import defaultdict

import pytest

_rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])   # nodeid -> [wall, self, children, server]
_TICK = os.sysconf("SC_CLK_TCK")
_attributed: dict[int, float] = {}   # server pid -> the CPU of it already put in a "server" column


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
        live1 = _servers()      # first: a poll() there may reap a server that ended
        me1, kids1 = _cpu()
        row = _rows[item.nodeid]
        row[0] += time.perf_counter() - wall0
        row[1] += me1 - me0
        for pid in live1.keys() & live0.keys():
            row[3] += live1[pid] - live0[pid]
            _attributed[pid] = _attributed.get(pid, 0.0) + live1[pid] - live0[pid]
        gone = sum(_attributed.pop(pid, 0.0) for pid in live0.keys() - live1.keys())
        row[2] += kids1 - kids0 - gone


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


def timeline(path: str, bin_s: float = 30.0) -> None:
    """Each xdist worker's span in a CPU_TIMES_FILE of one run, and the CPU asked for per `bin_s` (a test's
    cpu + live-server CPU spread evenly over its wall; a server's start and its last phase land in the test
    that reaps it)."""
    rows = []
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 7:
                wall, me, kids, nodeid, live, end, worker = cols[:7]
                rows.append((float(end) - float(wall), float(end), float(me) + float(kids) + float(live), nodeid, worker))
    t0, t1 = min(r[0] for r in rows), max(r[1] for r in rows)
    print(f"{len(rows)} tests over {t1 - t0:.0f} s; cpu (self + children + live servers) {sum(r[2] for r in rows):.0f} s")
    workers: dict[str, list] = defaultdict(list)
    for r in rows:
        workers[r[4]].append(r)
    for name, rs in sorted(workers.items()):
        last = max(rs, key=lambda r: r[1])
        print(f"  {name}: {min(r[0] for r in rs) - t0:6.1f} – {last[1] - t0:6.1f} s, {len(rs)} tests, busy "
              f"{sum(r[1] - r[0] for r in rs):6.1f} s, cpu {sum(r[2] for r in rs):6.1f} s, last {last[3].split('::')[0]}")
    bins: dict[int, float] = defaultdict(float)
    for start, end, cpu, _, _ in rows:
        rate, t = cpu / max(end - start, 1e-3), start
        while t < end:
            edge = min(end, t0 + (int((t - t0) // bin_s) + 1) * bin_s)
            bins[int((t - t0) // bin_s)] += rate * (edge - t)
            t = edge
    print(f"  cpu asked per {bin_s:g} s (cores):", " ".join(f"{bins[i] / bin_s:.2f}" for i in range(max(bins) + 1)))


if __name__ == "__main__":
    import sys
    timeline(sys.argv[1])
