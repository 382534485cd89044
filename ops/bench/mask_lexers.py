"""A step's mask fill with the rows spread over several lexers, against all rows on one (µs a step).

llguidance's ``LLMatcher.deep_copy`` shares the original's lexer (its DFA cache) behind one mutex that a
mask computation holds throughout: rows copied from one prototype fill one at a time whatever the
executor's threads (aotx.structured.constraint.Constraint.start). This bench fills ``--rows`` rows of the
story schema of ops.bench.structured for each (lexers, threads) pair: rows copied from ``lexers``
prototypes round-robin, llguidance's executor with ``threads`` threads (aotx.structured.batch.fill_rows,
rows sorted by lexer). Every row walks its own place in a story inside the JSON string (as
ops.bench.structured_host's sampler), consuming one token a step; the masks of every pair are checked
equal to the first's (the lexer is a cache: the masks must not change).

    .venv/bin/python -m ops.bench.mask_lexers                                  # here (the GGUF's tokenizer)
    .venv/bin/python -m ops.bench.mask_lexers --dump var/mask_lexers.json     # for a host without the GGUF
    python3 -m ops.bench.mask_lexers --load var/mask_lexers.json --threads 1,2,4,8 --lexers 1,2,4,8
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time

import llguidance
import numpy as np

from aotx.structured import batch
from aotx.structured.constraint import Constraint
from kernels.token_mask import mask_words


def _source(args) -> dict:
    if args.load:
        with open(args.load) as f:
            return json.load(f)
    from aotx.structured import ConstraintCompiler
    from kernels import load_model
    from ops.bench.structured import SCHEMA
    from ops.bench.structured_host import STORY
    tok = load_model(progress=False).tokenizer
    c = ConstraintCompiler(tok).json_schema(SCHEMA)
    return {"hf_json": tok.hf_json(), "vocab": tok.vocab_size, "eos": tok.eos_id, "grammar": c.grammar,
            "prefix": tok.encode('{"story": "'), "story": tok.encode(STORY * 4)}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(src: dict, ll_tok, rows: int, steps: int, warmup: int, lexers: int, threads: int) -> tuple:
    """(fill µs a step after warm-up, during warm-up, the masks of the last step's rows, ms to build the
    prototypes, MB the process's RSS grew by over the run)."""
    rss = _rss_mb()
    constraint = Constraint("json_schema", f"bench-{lexers}-{threads}", src["grammar"], ll_tok)
    built = time.perf_counter()
    constraint.prepare(lexers)              # what the compiler does (Constraint.start builds none)
    built = 1e3 * (time.perf_counter() - built)
    batch._executor = llguidance.LLExecutor(num_threads=threads)
    matchers = [constraint.start() for _ in range(rows)]
    prefix, story = src["prefix"], src["story"]
    bits = np.zeros((rows, mask_words(src["vocab"])), np.uint32)
    warm = steady = 0.0
    for p in range(warmup + steps):
        start = time.perf_counter()
        batch.fill_rows(matchers, bits)
        took = time.perf_counter() - start
        if p < warmup:
            warm += took
        else:
            steady += took
        for j, m in enumerate(matchers):
            tok = prefix[p] if p < len(prefix) else story[(p - len(prefix) + 37 * j) % len(story)]
            if not m.consume(tok):
                raise RuntimeError(f"row {j}: token {tok} refused at {p}")
    return 1e6 * steady / steps, 1e6 * warm / max(warmup, 1), bits.copy(), built, _rss_mb() - rss


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--warmup", type=int, default=16)
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--lexers", default="1,2,4")
    ap.add_argument("--dump", help="write the tokenizer, grammar and story tokens here and stop")
    ap.add_argument("--load", help="read them from here (no GGUF needed)")
    args = ap.parse_args(argv)
    src = _source(args)
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(src, f)
        return 0
    ll_tok = llguidance.LLTokenizer(src["hf_json"], n_vocab=src["vocab"], eos_token=src["eos"])
    print(f"\n## Mask fill over several lexers: {args.rows} rows, story schema, {args.steps} steps after "
          f"{args.warmup} of warm-up ({os.cpu_count()} CPUs, affinity {len(os.sched_getaffinity(0))}; "
          f"load {open('/proc/loadavg').read().split()[0]})\n")
    print("| lexers | threads | fill µs/step | µs/row | during warm-up µs/step | prototypes built ms "
          "| RSS growth MB | masks == first |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    first = None
    bad = 0
    for t in [int(x) for x in args.threads.split(",")]:
        for lx in [int(x) for x in args.lexers.split(",")]:
            us, warm_us, masks, built_ms, rss_mb = run(src, ll_tok, args.rows, args.steps, args.warmup, lx, t)
            first = masks if first is None else first
            same = bool(np.array_equal(first, masks))
            bad += not same
            print(f"| {lx} | {t} | {us:.0f} | {us / args.rows:.1f} | {warm_us:.0f} | {built_ms:.1f} | {rss_mb:.1f} "
                  f"| {same} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
