"""ops.proc_cpu: a process's main-thread CPU (/proc schedstat) and all-thread CPU (/proc stat), the
stored responses bench's CPU per response."""
from __future__ import annotations

import os
import threading
import time

from ops.proc_cpu import CpuMeter, main_thread_cpu, process_cpu


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_meter_counts_the_main_threads_cpu_and_every_threads():
    if main_thread_cpu(os.getpid()) is None:   # a kernel without schedstat: the bench prints "–"
        assert CpuMeter(os.getpid()).stop() == (None, None)
        return
    meter = CpuMeter(os.getpid())
    meter.start()
    other = threading.Thread(target=_spin, args=(0.05,))
    other.start()
    other.join()
    loop_only = main_thread_cpu(os.getpid())
    _spin(0.05)
    loop, everything = meter.stop()
    assert 0.04 <= loop and everything >= loop + 0.02      # the other thread's CPU counts in the process's only
    # (the process's figure is in clock ticks of 10 ms)
    assert main_thread_cpu(os.getpid()) >= loop_only + 0.04 and process_cpu(os.getpid()) > 0


def test_no_process_no_figures():
    assert CpuMeter(None).stop() == (None, None)


def test_usage_gives_the_main_thread_the_process_and_its_children_and_delta_their_difference():
    import subprocess
    import sys

    from ops.proc_cpu import delta, usage

    child = subprocess.Popen([sys.executable, "-c", "import time\ninput()\nend = time.process_time() + 0.3\n"
                              "while time.process_time() < end: pass\nprint('spun', flush=True)\ninput()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        before = usage(os.getpid())
        child.stdin.write("go\n")
        child.stdin.flush()
        _spin(0.05)
        assert child.stdout.readline() == "spun\n"     # the child has spun its 0.3 s of CPU
        used = delta(before, usage(os.getpid()))
        # (the process's ticks hold the main thread's, read a moment apart: up to two 10 ms ticks apart, compared
        # with a margin for the float differences of tick counts — 0.06 - 0.04 read 0.0399999… once)
        assert used["main"] >= 0.03 and used["process"] >= used["main"] - 0.02 - 1e-6 and used["children"] >= 0.2
    finally:
        child.communicate("\n", timeout=30)
