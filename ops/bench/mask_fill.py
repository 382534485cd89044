"""Host cost of one decode step's token masks, in µs per step, for N rows of one JSON schema.

1. The fill alone: serial (one matcher at a time, on this thread) against parallel (llguidance's
   LLExecutor: its own threads, the GIL released; aotx.structured.batch.fill_rows).
2. The engine thread's share of a step's mask (aotx.engine.masks.LateMask: the pending tokens
   consumed, the rows filled) while the engine thread does `--host-us` of other work per step
   (reading the step before back, delivering, scheduling, enqueueing the forward): inline (the
   whole mask after that work, on the engine thread) against prefetched (aotx.engine.mask_prefetch:
   a worker fills from the launch on, concurrently with that work; the engine thread only waits for
   what is left and copies nothing in the steady state).

    .venv/bin/python -m ops.bench.mask_fill                       # 64 rows, 64 steps
    .venv/bin/python -m ops.bench.mask_fill --rows 63 --steps 128 --host-us 1500

The rows start from the bench schema of ops.bench.structured (a long string field) and, for part
1, from a nested object schema; every row walks its own seeded random path through the grammar (a
token drawn among the allowed ones), so the rows' states differ as in a batch of streams. Prints
markdown tables.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from types import SimpleNamespace

import numpy as np

from aotx.engine.launch import Done
from aotx.engine.mask_prefetch import MaskPrefetch
from aotx.engine.masks import step_mask
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


def _advance(matchers, bits, rngs, vocab) -> None:
    """Each matcher consumes one token drawn from its allowed ones (a restart once it is done)."""
    for j, m in enumerate(matchers):
        ids = allowed_ids(bits[j], vocab)
        ids = ids[ids != m.eos] if len(ids) > 1 else ids
        if not len(ids) or m.row.accepting and len(ids) == 1:
            matchers[j] = m.restart()
            continue
        m.row.consume(int(rngs[j].choice(ids)))


class _Row:
    def __init__(self, constraint, eos: int) -> None:
        self.constraint, self.eos = constraint, eos
        self.row = constraint.start()

    def restart(self) -> _Row:
        return _Row(self.constraint, self.eos)


def measure(constraint, rows: int, steps: int, eos: int, parallel: bool) -> float:
    """µs per step of filling `rows` masks (the token walk between steps is not timed)."""
    vocab = constraint.vocab_size
    matchers = [_Row(constraint, eos) for _ in range(rows)]
    rngs = [np.random.default_rng(j) for j in range(rows)]
    bits = np.zeros((rows, mask_words(vocab)), dtype=np.uint32)
    spent = 0.0
    for _ in range(steps):
        start = time.perf_counter()
        if parallel:
            mask_batch.fill_rows([m.row for m in matchers], bits)
        else:
            for j, m in enumerate(matchers):
                m.row.fill(bits[j])
        spent += time.perf_counter() - start
        _advance(matchers, bits, rngs, vocab)
    return 1e6 * spent / steps


def _busy(us: float) -> None:
    """The engine thread's other work of a step: Python bytecode holding the GIL for `us` µs."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        sum(range(50))


def engine_thread(constraint, rows: int, steps: int, host_us: float, prefetch: bool) -> tuple[float, float]:
    """(µs per step the engine thread spends in the mask, µs per step of the whole host step)."""
    vocab = constraint.vocab_size
    seqs = [SimpleNamespace(seq_id=j, matcher=constraint.start(), output_ids=[], pending=0, pending_row=-1,
                            params=SimpleNamespace(constraint=constraint)) for j in range(rows)]
    rngs = [np.random.default_rng(j) for j in range(rows)]
    bits = np.zeros((rows, mask_words(vocab)), dtype=np.uint32)
    mask_batch.fill_rows([s.matcher for s in seqs], bits)
    pre = MaskPrefetch()
    in_mask = whole = 0.0
    try:
        for _ in range(steps):
            ids = np.array([int(rngs[j].choice(allowed_ids(bits[j], vocab))) for j in range(rows)], dtype=np.int32)
            launched = Done(None, ids)          # step k: its tokens, as the device returns them
            for j, seq in enumerate(seqs):
                seq.pending, seq.pending_row = 1, j
            start = time.perf_counter()
            if prefetch:
                pre.start(SimpleNamespace(plan=SimpleNamespace(sample=list(enumerate(seqs))), launched=launched))
            _busy(host_us)
            t0 = time.perf_counter()
            mask = step_mask(seqs, launched, pre.take(launched) if prefetch else None)()
            end = time.perf_counter()
            in_mask += end - t0
            whole += end - start
            bits = np.ascontiguousarray(mask.bits)
            for j, seq in enumerate(seqs):      # step k read back
                seq.output_ids.append(int(ids[j]))
                seq.pending = 0
    finally:
        pre.close()
    return 1e6 * in_mask / steps, 1e6 * whole / steps


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--host-us", type=float, default=1500.0,
                    help="the engine thread's other work per step (µs; ~1.5-2 ms at 64 streams on the H200 host)")
    args = ap.parse_args(argv)
    bundle = load_model(progress=False)
    compiler = ConstraintCompiler(bundle.tokenizer)
    eos = bundle.tokenizer.eos_id
    print(f"\n## Mask fill, {args.rows} matchers, {args.steps} steps, {os.cpu_count()} CPUs, "
          f"{mask_batch.threads()} executor threads\n")
    print("| schema | serial µs/step | parallel µs/step | parallel µs/row |")
    print("|---|---:|---:|---:|")
    for name, schema in (("story (ops.bench.structured)", STORY), ("nested object", NESTED)):
        constraint = compiler.json_schema(schema)
        serial = measure(constraint, args.rows, args.steps, eos, parallel=False)
        par = measure(constraint, args.rows, args.steps, eos, parallel=True)
        print(f"| {name} | {serial:.0f} | {par:.0f} | {par / args.rows:.1f} |")
    story = compiler.json_schema(STORY)
    print(f"\n## The engine thread's share, {args.rows} rows, story schema, {args.host_us:.0f} µs of other "
          f"host work a step\n")
    print("| mask | engine thread in the mask µs/step | whole host step µs/step |")
    print("|---|---:|---:|")
    for name, prefetch in (("inline (late mask fills all)", False), ("prefetched (worker thread)", True)):
        in_mask, whole = engine_thread(story, args.rows, args.steps, args.host_us, prefetch)
        print(f"| {name} | {in_mask:.0f} | {whole:.0f} |")


if __name__ == "__main__":
    main()
