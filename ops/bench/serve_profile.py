"""A cProfile of a server's main thread, written when it exits (a benchmark tool, not a test).

    python -m ops.bench.serve_profile OUT -m MODULE [ARGS...]

runs `python -m MODULE ARGS...` (ops.cli, ops.bench.paced_serve) under cProfile and dumps the stats to
OUT at exit (a SIGTERM drains `aotx serve` and exits normally). The timer is `$AOTX_SERVE_PROFILE_TIMER`:
`wall` (the default, cProfile's own: GIL waits count where they happen) or `thread` (time.thread_time:
the main thread's own CPU, what the event loop spends). ops.gpu.serve_bench.start_server uses it where
`$AOTX_SERVE_PROFILE` names OUT.
"""
from __future__ import annotations

import atexit
import cProfile
import os
import runpy
import sys
import time


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "-m":
        raise SystemExit("usage: python -m ops.bench.serve_profile OUT -m MODULE [ARGS...]")
    out, module, rest = argv[0], argv[2], argv[3:]
    timer = os.environ.get("AOTX_SERVE_PROFILE_TIMER", "wall")
    prof = cProfile.Profile(time.thread_time) if timer == "thread" else cProfile.Profile()

    def dump() -> None:
        prof.disable()
        prof.dump_stats(out)
    atexit.register(dump)
    sys.argv = [module, *rest]
    prof.enable()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
