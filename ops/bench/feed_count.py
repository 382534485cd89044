"""Benchmark (not a test): instructions a journal message of boot's feed, counted by callgrind.

    PYTHONHASHSEED=0 .venv/bin/python -m ops.bench.feed_count [--messages 2000] [--mode many|follow]

The method of sessions 9–13 as one command. The boot bench's log (ops.bench.boot's Generator: 64
participants, member-rights toggles, a retirement every 12th sequence; its two setup ticks a lineage
first, then the lineages in turn, stream sequences 1, 2, …) is generated once into a temporary file;
then this same module runs twice under `valgrind --tool=callgrind`, loading the file and feeding a
fresh Projector the first `--messages` messages, then none: the difference ÷ `--messages` is the
feed's instructions a message, without the interpreter's start, the imports and the load.
`--mode many`: boot's path (`Projector.feed_many`, 256 messages a call); `--mode follow`: a follower's
(`Projector.feed` one by one inside `applying()`, runs of 256). Both runs check nothing but that the
fed messages all applied; the counts do not depend on the machine's load (the child runs with one
OpenBLAS thread: see `_grind`; compile the tree first, or an edited module's compile is counted).
"""
from __future__ import annotations

import argparse
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SUBJECT_PREFIX = "bb.j"


def generate(total: int, path: Path, lineages: int = 64) -> None:
    """The boot bench's first `total` messages (subject, seq, data), pickled to `path`."""
    from aotx.runtime.replay import TICK_KIND
    from aotx.state import Capacities, lineage_for
    from eventlog import StreamSpec
    from ops.bench.boot import Generator

    spec = StreamSpec(name="BENCHBOOT", subject_prefix=SUBJECT_PREFIX)
    gen = Generator(lineages, Capacities())
    gen.setup()
    i = 0
    while sum(len(t) for t in gen.ticks.values()) < total:
        gen.mutation(i)
        i += 1
    rows = [(name, tick) for step in range(2) for name in gen.names for tick in (gen.ticks[name][step],)]
    later = {n: gen.ticks[n][2:] for n in gen.names}
    for step in range(max(len(v) for v in later.values())):
        rows += [(n, later[n][step]) for n in gen.names if step < len(later[n])]
    messages = [(spec.subject(lineage_for(n).hex(), TICK_KIND), seq, data)
                for seq, (n, data) in enumerate(rows[:total], start=1)]
    path.write_bytes(pickle.dumps(messages))


def feed(path: Path, count: int, mode: str) -> None:
    from aotx.runtime.replay import Projector
    from aotx.state import Capacities

    messages = pickle.loads(path.read_bytes())[:count]
    p = Projector("BENCHBOOT", "bench", Capacities())
    for i in range(0, len(messages), 256):
        if mode == "many":
            p.feed_many(messages[i:i + 256])
        else:
            with p.applying():
                for subject, seq, data in messages[i:i + 256]:
                    p.feed(subject, seq, data)
    assert p.messages == len(messages)


def _grind(path: Path, count: int, mode: str, out: Path) -> int:
    # one OpenBLAS thread: numpy's idle BLAS workers spin while the main thread works, and callgrind counts their
    # spinning (~2–35 M instructions a run, depending on the timing: the counts moved by up to 17k a message)
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                    "ops.bench.feed_count", "--child", str(path), "--messages", str(count), "--mode", mode],
                   check=True, env=env, stderr=subprocess.DEVNULL)
    text = out.read_text(errors="replace")
    m = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
    assert m, "no totals in the callgrind output"
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.feed_count")
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--mode", choices=("many", "follow"), default="many")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--keep", action="store_true", help="keep the callgrind files (callgrind_annotate them)")
    args = ap.parse_args(argv)
    if args.child is not None:
        feed(args.child, args.messages, args.mode)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="aotx-feed-count-"))
    log = tmp / "log.pickle"
    generate(args.messages, log)
    fed = _grind(log, args.messages, args.mode, tmp / "callgrind.fed")
    none = _grind(log, 0, args.mode, tmp / "callgrind.none")
    print(f"feed_count --mode {args.mode}: {args.messages} messages {fed:,} − none {none:,} instructions = "
          f"{(fed - none) / args.messages:,.0f} a message" + (f" (files in {tmp})" if args.keep else ""), flush=True)
    if not args.keep:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
