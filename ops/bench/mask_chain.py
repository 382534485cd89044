"""The host's mask chain of one decode step, part by part, replayed on this thread: µs of CPU (and wall) a
step for N rows of the bench schema (ops.bench.structured's story), three ways in the same run, interleaved
step by step (each way its own rows, the same seeded token paths):

* ``general``: the mask's general path (any RowMatcher-like matcher: one Python call a row to consume, then
  ``batch.fill_rows``) -- what main ran before session 12;
* ``plan-serial``: the plan (``LateMask.prepare``: what llguidance is handed, built once), the consume
  a GIL-held llguidance call a row (``AOTX_MASK_CONSUME_PAR=0``);
* ``plan-par``: the plan, the consume in one GIL-released llguidance call (the default).

Parts: ``engine`` (the engine thread at the launch: the mask, chained to the one before as the runner's, + defer),
``prepare`` (the mask worker before the read-back, off the chain), ``chain`` (the worker from the read-back to the
bits: consume, fill), ``check`` (the engine thread's check of the tokens read back: LateMask.verify for the step,
else RowMatcher.sync a row). Replayed on one thread, the calling thread's
CPU is the GIL-held share (llguidance's pool does the GIL-released work on its own threads): beside a busy
engine thread, that share is what the two threads take turns for (the wall of the chain on a GPU host is
that share, stretched by the GIL hand-overs, plus the pool's work). ``--callgrind PART``: run under
``valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes`` and count only that part (one way,
``--ways``), less an empty part's toggles (``noop``). ``--busy``: a second thread runs Python throughout (the
engine thread's other work) at the mask worker's switch interval, so the walls show the GIL's turns -- on a
host with idle cores (the GPU hosts' 16 CPUs); on a loaded 2-core box the pool's thread waits for a core and
the walls show that instead::

    .venv/bin/python -m ops.bench.mask_chain --rows 64 --steps 60
    valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes .venv/bin/python -m ops.bench.mask_chain \\
        --steps 24 --ways general --callgrind chain
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np

from aotx.engine.launch import Done
from aotx.engine import masks
from aotx.engine.mask_worker import SWITCH_S
from aotx.engine.masks import LateMask
from aotx.structured import ConstraintCompiler
from kernels import load_model
from kernels.token_mask import allowed_ids
from ops.bench.structured import SCHEMA as STORY

WAYS = {"general": (False, "8"), "plan-serial": (True, "0"), "plan-par": (True, "8")}
PARTS = ("engine", "noop", "prepare", "chain", "check")
WARMUP = 8


class Way:
    """One way's rows (sequences with their matchers), stepped one step behind as the engine does."""

    def __init__(self, name: str, constraint, rows: int) -> None:
        self.name, self.plan, self.par = name, *WAYS[name]
        self.vocab = constraint.vocab_size
        self.seqs = [SimpleNamespace(seq_id=j, matcher=constraint.start(), output_ids=[], pending=0, pending_row=-1,
                                     params=SimpleNamespace(constraint=constraint)) for j in range(rows)]
        self.rngs = [np.random.default_rng(j) for j in range(rows)]
        first = LateMask(self.seqs, None, None)     # (chained, as the runner's: the next one is its consumer)
        first.run()
        self.bits = np.ascontiguousarray(first().bits)
        self.mask = first
        self.last = masks._LAST[0]
        self.cpu = {p: [] for p in PARTS}
        self.wall = {p: [] for p in PARTS}

    def step(self, count: str | None) -> None:
        """One step: token k-1 drawn among its mask's allowed ones (not timed), mask k built, prepared, run
        (consume k-1, fill k), each token of k-1 checked."""
        rows = len(self.seqs)
        ids = np.array([int(self.rngs[j].choice(allowed_ids(self.bits[j], self.vocab))) for j in range(rows)],
                       dtype=np.int32)
        for j, s in enumerate(self.seqs):
            s.pending, s.pending_row = 1, j
        os.environ["AOTX_MASK_CONSUME_PAR"] = self.par
        last, masks._LAST[0] = masks._LAST[0], self.last     # (each way its own last plan, as one engine has)
        box: dict = {}

        def engine():       # (the runner's: chained to the launch before's mask)
            box["mask"] = mask = masks.step_mask(self.seqs, Done(None, ids), self.mask)
            mask.defer(True)

        def prepare():
            if self.plan:
                box["mask"].prepare()
            else:
                box["mask"]._plan = False       # the general path

        tids = ids.tolist()

        def check():        # (step_output's: the step at once where the masks allow, else a row at a time)
            if self.mask.verify(ids):
                return
            for s, tid in zip(self.seqs, tids):
                if not s.matcher.sync(len(s.output_ids), tid):
                    raise AssertionError(f"row {s.seq_id}: token {tid} refused")

        for part, fn in (("engine", engine), ("noop", lambda: None), ("prepare", prepare),
                         ("chain", lambda: box["mask"].run()), ("check", check)):
            if count == part:
                subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True,
                               stdout=subprocess.DEVNULL)
            c0, t0 = time.thread_time(), time.perf_counter()
            fn()
            self.cpu[part].append(time.thread_time() - c0)
            self.wall[part].append(time.perf_counter() - t0)
            if count == part:
                subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True,
                               stdout=subprocess.DEVNULL)
        for j, s in enumerate(self.seqs):
            s.output_ids.append(int(ids[j]))
            s.pending = 0
        self.bits = np.ascontiguousarray(box["mask"]().bits)
        self.last, masks._LAST[0] = masks._LAST[0], last
        self.mask = box["mask"]        # (alive until the next step's plan is built, as in the engine)
        # a row that is done starts again (never, within the story's minLength)
        assert not any(s.matcher.failed for s in self.seqs)


def _spin(stop: threading.Event) -> None:
    """The engine thread's other work (delivering, scheduling, building): Python holding the GIL."""
    while not stop.is_set():
        sum(range(50))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of: {', '.join(WAYS)}")
    ap.add_argument("--callgrind", choices=PARTS, help="count this part's instructions (under callgrind)")
    ap.add_argument("--busy", action="store_true",
                    help="a second thread runs Python throughout (the engine thread's other work), the GIL's switch "
                         "interval the mask worker's: the walls then show the GIL's turns")
    args = ap.parse_args(argv)
    names = [w.strip() for w in args.ways.split(",") if w.strip()]
    if not set(names) <= set(WAYS):
        ap.error(f"--ways: of {', '.join(WAYS)}")
    bundle = load_model(progress=False)
    constraint = ConstraintCompiler(bundle.tokenizer).json_schema(STORY)
    ways = [Way(n, constraint, args.rows) for n in names]
    saved = os.environ.get("AOTX_MASK_CONSUME_PAR")
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,), daemon=True) if args.busy else None
    interval = sys.getswitchinterval()
    if spinner is not None:
        sys.setswitchinterval(SWITCH_S)
        spinner.start()
    try:
        for step in range(WARMUP + args.steps):
            for k in range(len(ways)):                  # each step, the ways in a rotating order
                ways[(step + k) % len(ways)].step(args.callgrind if step >= WARMUP else None)
    finally:
        stop.set()
        if spinner is not None:
            spinner.join()
        sys.setswitchinterval(interval)
        if saved is None:
            os.environ.pop("AOTX_MASK_CONSUME_PAR", None)
        else:
            os.environ["AOTX_MASK_CONSUME_PAR"] = saved
    from aotx.structured.batch import threads
    busy = f"; a second thread busy in Python, switch interval {SWITCH_S * 1e6:.0f} µs" if args.busy else ""
    print(f"\n## A {args.rows}-row step's mask parts on one thread ({args.steps} steps, median; µs CPU of this thread "
          f"(wall); llguidance pool {threads()} threads; load {os.getloadavg()[0]:.2f}{busy})\n")
    print("| way | engine: LateMask + defer | prepare (worker, before the read-back) | chain: consume + fill | "
          "check (engine thread) |")
    print("|---|---:|---:|---:|---:|")
    for w in ways:
        def f(part):
            cpu, wall = w.cpu[part][WARMUP:], w.wall[part][WARMUP:]
            return f"{1e6 * statistics.median(cpu):.0f} ({1e6 * statistics.median(wall):.0f})"
        print(f"| {w.name} | {f('engine')} | {f('prepare')} | {f('chain')} | {f('check')} |")


if __name__ == "__main__":
    main()
