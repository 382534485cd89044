"""Host cost of one decode step's token masks, in µs per step, for N rows of one JSON schema.

1. The fill and the consume alone, one step's rows: serial (one Python call per row, on this thread)
   against llguidance's LLExecutor (one call, its own threads, the GIL released:
   aotx.structured.batch) at several pool sizes (``--threads``; ``AOTX_MASK_THREADS`` picks the
   engine's). Also the CPUs this process may use (affinity, cgroup quota): a pool larger than those
   only adds contention.
2. The engine thread's share of a step's mask (aotx.engine.masks.LateMask: the pending tokens
   consumed, the rows filled) while the engine thread does `--host-us` of other GIL-holding work per
   step (reading the step before back, delivering, scheduling, building the next step): inline (the
   mask computed by the engine thread after that work, as AOTX_MASK_WORKER=0) against the mask
   worker (aotx.engine.mask_worker: the engine thread consumes the tokens it reads back, a Python
   call a row, and the worker fills the bitmasks during that other work; the engine thread waits at
   the next launch only for what is left) against matcher processes (aotx.engine.mask_procs,
   ``--procs``: the engine thread sends the tokens it reads back in one frame a process, the
   processes consume and fill into shared memory during that other work, the worker thread copies
   the bits out). Warm-up steps (a process's start, its tokenizer and grammar) are not counted.

    .venv/bin/python -m ops.bench.mask_fill                       # 64 rows, 64 steps
    .venv/bin/python -m ops.bench.mask_fill --rows 63 --steps 128 --host-us 1500

The rows start from the bench schema of ops.bench.structured (a long string field) and from a
nested object schema; every row walks its own seeded random path through the grammar (a token drawn
among the allowed ones), so the rows' states differ as in a batch of streams. Prints markdown tables.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from types import SimpleNamespace

import llguidance
import numpy as np

from aotx.engine.launch import Done
from aotx.engine.mask_procs import ProcMaskWorker
from aotx.engine.mask_worker import MaskWorker
from aotx.structured import ConstraintCompiler
from aotx.structured import batch as mask_batch
from kernels import load_model
from kernels.token_mask import allowed_ids, mask_words
from ops.bench.structured import SCHEMA as STORY

NESTED = {"type": "object", "additionalProperties": False, "required": ["name", "tags", "size", "parts"],
          "properties": {"name": {"type": "string", "maxLength": 40},
                         "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 8},
                         "size": {"type": "integer", "minimum": 0, "maximum": 1000},
                         "parts": {"type": "array", "maxItems": 6, "items": {
                             "type": "object", "additionalProperties": False, "required": ["id", "ok"],
                             "properties": {"id": {"type": "number"}, "ok": {"type": "boolean"}}}}}}


def cpus() -> str:
    """What this process may run on: os.cpu_count, the affinity mask, the cgroup v2 quota."""
    out = f"{os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}"
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        out += ", cgroup cpu.max " + ("unlimited" if quota == "max" else f"{int(quota) / int(period):.1f} CPUs")
    except (OSError, ValueError):
        out += ", no cgroup v2 cpu.max"
    return out


WARMUP = 8


def measure(constraint, rows: int, steps: int, eos: int, threads: int) -> tuple[float, float]:
    """(µs per step filling `rows` masks, µs per step consuming one token each); threads 0: serial."""
    vocab = constraint.vocab_size
    pool = llguidance.LLExecutor(num_threads=threads) if threads else None
    matchers = [constraint.start() for _ in range(rows)]
    rngs = [np.random.default_rng(j) for j in range(rows)]
    bits = np.zeros((rows, mask_words(vocab)), dtype=np.uint32)
    fill = consume = 0.0
    for step in range(WARMUP + steps):
        if step == WARMUP:      # the matchers' lexers are cold at first (a row's first tokens)
            fill = consume = 0.0
        start = time.perf_counter()
        if pool is None:
            for j, m in enumerate(matchers):
                m.fill(bits[j])
        else:
            pool.unsafe_compute_mask_ptr([(m.ll, j) for j, m in enumerate(matchers)], bits.ctypes.data,
                                         bits.shape[1] * 4, rows)
        fill += time.perf_counter() - start
        tokens = []
        for j, m in enumerate(matchers):        # (not timed) each row's next token, among its allowed ones
            ids = allowed_ids(bits[j], vocab)
            ids = ids[ids != eos] if len(ids) > 1 else ids
            tokens.append(int(rngs[j].choice(ids)) if len(ids) else eos)
        start = time.perf_counter()
        if pool is None:
            for m, t in zip(matchers, tokens):
                m.consume(t)
        else:
            pool.consume_token_par([(m.ll, t) for m, t in zip(matchers, tokens)])
        consume += time.perf_counter() - start
        # a row that is done (or refused its token) starts again
        matchers = [m if not (m.ll.is_stopped() or m.ll.is_error()) else constraint.start() for m in matchers]
    return 1e6 * fill / steps, 1e6 * consume / steps


def _busy(us: float) -> None:
    """The engine thread's other work of a step: Python bytecode holding the GIL for `us` µs."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        sum(range(50))


def _children_cpu(pool) -> float:
    """CPU seconds (user + system) the matcher processes of `pool` have used so far (/proc/PID/stat)."""
    if pool is None or getattr(pool, "pool", None) is None:
        return 0.0
    total = 0
    for proc in pool.pool.processes():
        try:
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def engine_thread(constraint, rows: int, steps: int, host_us: float, worker: bool,
                  procs: int = 0) -> dict[str, float | str]:
    """Per step, µs: the engine thread consuming the tokens it reads back (procs: sending them) and
    getting the mask at the next launch (wall clock), the whole host step; CPU time (robust on a shared
    box, where wall time counts preemption): the engine thread's in its mask parts, this process's other
    threads' (the mask worker), the matcher processes'; the processes' own consume / fill (slowest)."""
    vocab = constraint.vocab_size
    seqs = [SimpleNamespace(seq_id=j, matcher=constraint.start(), output_ids=[], pending=0, pending_row=-1,
                            params=SimpleNamespace(constraint=constraint)) for j in range(rows)]
    rngs = [np.random.default_rng(j) for j in range(rows)]
    bits = np.zeros((rows, mask_words(vocab)), dtype=np.uint32)
    mask_batch.fill_rows([s.matcher for s in seqs], bits)
    pool = ProcMaskWorker(procs) if procs else MaskWorker()
    pool.enabled = worker
    consume = get = whole = eng_cpu = rb_cpu = chain = 0.0
    own = (0, 0.0, 0.0)
    cpu0 = (0.0, 0.0, 0.0)
    try:
        for step in range(WARMUP + steps):
            if step == WARMUP:
                consume = get = whole = eng_cpu = rb_cpu = chain = 0.0
                if procs:
                    own = (pool.pool.steps, pool.pool.consume_s, pool.pool.fill_s)
                cpu0 = (time.process_time(), time.thread_time(), _children_cpu(pool))
            ids = np.array([int(rngs[j].choice(allowed_ids(bits[j], vocab))) for j in range(rows)], dtype=np.int32)
            launched = Done(None, ids)          # step k-1: its tokens, as the device returns them
            for j, seq in enumerate(seqs):
                seq.pending, seq.pending_row = 1, j
            c0 = time.thread_time()
            start = time.perf_counter()
            mask = pool.step_mask(seqs, launched)   # step k's mask, handed over once its forward is enqueued
            ready: list[float] = []
            if pool.take(mask):
                mask.when_ready(lambda: ready.append(time.perf_counter()))
                pool.handed(mask)
            t0 = time.perf_counter()
            cr = time.thread_time()
            pool.read_back(launched)            # step k-1 read back: its tokens consumed, the fill handed over
            t1 = time.perf_counter()
            c1 = time.thread_time()
            rb_cpu += c1 - cr
            _busy(host_us)                      # deliver k-1, schedule and build k+1
            c2 = time.thread_time()
            t2 = time.perf_counter()
            out = mask()                        # the next launch samples step k
            end = time.perf_counter()
            eng_cpu += (c1 - c0) + (time.thread_time() - c2)
            consume += t1 - t0
            get += end - t2
            chain += (ready[0] if ready else end) - t0      # read-back to the mask's bits ready (inline: got)
            whole += end - start
            bits = np.ascontiguousarray(out.bits)
            for j, seq in enumerate(seqs):
                seq.output_ids.append(int(ids[j]))
                seq.pending = 0
        others = (time.process_time() - cpu0[0]) - (time.thread_time() - cpu0[1])
        children = _children_cpu(pool) - cpu0[2]
        if procs:
            n = pool.pool.steps - own[0]
            own = f"{1e6 * (pool.pool.consume_s - own[1]) / n:.0f} / {1e6 * (pool.pool.fill_s - own[2]) / n:.0f}"
    finally:
        pool.close()
    return {"chain": 1e6 * chain / steps, "consume": 1e6 * consume / steps, "get": 1e6 * get / steps, "whole": 1e6 * whole / steps,
            "eng_cpu": 1e6 * eng_cpu / steps, "rb_cpu": 1e6 * rb_cpu / steps, "others": 1e6 * others / steps, "children": 1e6 * children / steps,
            "own": own if procs else ""}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--threads", default="1,2,4,8,12", help="LLExecutor pool sizes to measure")
    ap.add_argument("--procs", default="1,2,4", help="matcher process counts to measure (engine thread's share)")
    ap.add_argument("--skip-fill", action="store_true", help="only the engine thread's share")
    ap.add_argument("--host-us", type=float, default=1500.0,
                    help="the engine thread's other work per step (µs; ~1.5-2 ms at 64 streams on the H200 host)")
    args = ap.parse_args(argv)
    bundle = load_model(progress=False)
    compiler = ConstraintCompiler(bundle.tokenizer)
    eos = bundle.tokenizer.eos_id
    sizes = [int(t) for t in args.threads.split(",") if t.strip()]
    print(f"\n## Mask fill and consume, {args.rows} matchers, {args.steps} steps ({cpus()}; the engine's "
          f"pool: {mask_batch.threads()} threads)\n")
    print("| schema | way | fill µs/step | fill µs/row | consume µs/step |")
    print("|---|---|---:|---:|---:|")
    for name, schema in () if args.skip_fill else (("story (ops.bench.structured)", STORY), ("nested object", NESTED)):
        constraint = compiler.json_schema(schema)
        for threads in [0, *sizes]:
            fill, consume = measure(constraint, args.rows, args.steps, eos, threads)
            way = "serial (a call per row)" if threads == 0 else f"LLExecutor, {threads} threads"
            print(f"| {name} | {way} | {fill:.0f} | {fill / args.rows:.1f} | {consume:.0f} |")
    story = compiler.json_schema(STORY)
    print(f"\n## The engine thread's share, {args.rows} rows, story schema, {args.host_us:.0f} µs of other "
          f"host work a step ({mask_batch.threads()} executor threads)\n")
    print("| mask | consuming the tokens read back (processes: sending them) µs/step | getting the mask at the "
          "next launch µs/step | whole host step µs/step | engine thread CPU in its mask parts (of which the "
          "read-back) µs/step | chain: read-back to the bits ready µs/step | other "
          "threads' CPU µs/step | matcher processes' CPU µs/step | processes' own consume / fill µs/step |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ways = [("inline (AOTX_MASK_WORKER=0)", False, 0), ("mask worker", True, 0)]
    ways += [(f"matcher processes, {n} (AOTX_MASK_PROCS={n})", True, n) for n in
             (int(p) for p in args.procs.split(",") if p.strip())]
    for name, worker, procs in ways:
        r = engine_thread(story, args.rows, args.steps, args.host_us, worker, procs)
        print(f"| {name} | {r['consume']:.0f} | {r['get']:.0f} | {r['whole']:.0f} | {r['eng_cpu']:.0f} ({r['rb_cpu']:.0f}) | {r['chain']:.0f} | "
              f"{r['others']:.0f} | {r['children']:.0f} | {r['own']} |")


if __name__ == "__main__":
    main()
