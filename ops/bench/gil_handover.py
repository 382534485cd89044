"""What a few GIL-releasing calls cost a thread while another thread runs Python (the mask worker's
enqueue of a sampling beside a busy engine thread: docs/PERFORMANCE.md, session 7), against the same
calls with that other thread asleep.

    .venv/bin/python -m ops.bench.gil_handover [--calls 8] [--switch-s 0.00005]

Each call hashes a buffer with hashlib, which releases the GIL around the hash (as cuda.bindings does
around each driver call); buffer sizes give calls of a few µs to ~50 µs. A call short enough that the
other thread cannot wake in time keeps the GIL for free; a longer one hands it over, and the caller waits
about a switch interval to get it back.
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import threading
import time


def _spin(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(100):
            x += i


def _calls(fn, calls: int, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append(1e6 * (time.perf_counter() - start))
        time.sleep(0.001)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--reps", type=int, default=150)
    ap.add_argument("--switch-s", type=float, default=0.00005)
    args = ap.parse_args(argv)
    sys.setswitchinterval(args.switch_s)
    print(f"\n## {args.calls} GIL-releasing calls on a thread, another thread asleep or running Python "
          f"(switch interval {1e6 * args.switch_s:.0f} µs; load {open('/proc/loadavg').read().split()[0]})\n")
    print("| one call, alone | other thread asleep: µs p50 (mean) | running Python: µs p50 (mean) | ÷ (means) |")
    print("|---:|---:|---:|---:|")
    for nbytes in (4096, 16384, 65536):
        data = b"x" * nbytes

        def fn(data=data):
            hashlib.sha256(data).digest()     # > 2 KiB: the GIL is released around the hash
        one = statistics.median(_calls(fn, 1, 200))
        res = []
        for busy in (False, True):
            stop = threading.Event()
            spinner = threading.Thread(target=_spin, args=(stop,)) if busy else None
            if spinner is not None:
                spinner.start()
            out: list[float] = []
            worker = threading.Thread(target=lambda: out.extend(_calls(fn, args.calls, args.reps)))
            worker.start()
            worker.join()
            stop.set()
            if spinner is not None:
                spinner.join()
            res.append((statistics.median(out), statistics.mean(out)))
        (p0, m0), (p1, m1) = res
        print(f"| {one:.1f} µs | {p0:.1f} ({m0:.1f}) | {p1:.1f} ({m1:.1f}) | {m1 / m0:.1f}× |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
