"""sample_rows alone on the GPU: µs a call at the engine's batch sizes, for each way of sampling.

`python3 -m ops.gpu.sampling_bench [--rows 1,64,256] [--reps 50] [--kernels block,split]` (H200). The
logits are shaped like a small LM's (normal, sd 2, with a few tokens 6-10 above the rest in every row),
float32 [rows, 49152]. Each mode's ids from each kernel are compared with kernels/sampler.py (exact) before
it is timed, so a faster kernel that draws another token fails here as it does in `make gpu-check`.
Kernels (kernels/cuda/launchers.py ``Kernels.sample_split``): ``block`` is sample_rows (a block a row,
AOTX_SAMPLE_SPLIT=0), ``split`` is sample_rows_split (a row over a cluster of 8 blocks, AOTX_SAMPLE_SPLIT=1); both
run on the same uploaded rows in the same process, "block ÷ split" is the speed-up. Greedy is the peer of
each kernel's column: with temperature 0 the engine never runs sample_rows (the LM head's argmax), so
"÷ greedy" is what a sampled step pays over a greedy one in that kernel.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np

from kernels import sampler
from kernels.cuda import driver
from kernels.sampling_rows import SamplingRows
from ops.gpu.kernel_check import V, Ctx

MODES = {   # name: (temperature, top_p, top_k, masked, min_p, scratch: the rows read from a scratch copy)
    "greedy": (0.0, 1.0, 0, False, 0.0, False),
    "t=0.7": (0.7, 1.0, 0, False, 0.0, False),
    "t=0.7 top_p=0.95": (0.7, 0.95, 0, False, 0.0, False),
    "t=0.7 top_k=50": (0.7, 1.0, 50, False, 0.0, False),
    "t=0.7 min_p=0.05": (0.7, 1.0, 0, False, 0.05, False),
    "t=0.7 penalised rows (read from adjust_rows' scratch)": (0.7, 1.0, 0, False, 0.0, True),
    "t=1.3 top_p=0.9 top_k=1000": (1.3, 0.9, 1000, False, 0.0, False),
    "t=0.7 masked (1/2 of the vocab)": (0.7, 1.0, 0, 0.5, 0.0, False),
    "t=0.7 masked (95 %, no EOS: in a JSON string)": (0.7, 1.0, 0, 0.95, 0.0, False),
    "t=0.7 masked (8 tokens: between strings)": (0.7, 1.0, 0, 8, 0.0, False),
    "t=0.7 masked (all)": (0.7, 1.0, 0, 1.0, 0.0, False),
}


def model_like_logits(rng: np.random.Generator, rows: int) -> np.ndarray:
    logits = (rng.standard_normal((rows, V)) * 2.0).astype(np.float32)
    for r in range(rows):
        top = rng.choice(V, 12, replace=False)
        logits[r, top] += rng.uniform(6.0, 10.0, 12).astype(np.float32)
    return logits


KERNELS = {"block": False, "split": True}   # name: Kernels.sample_split


def run_mode(c: Ctx, logits: np.ndarray, mode: tuple, reps: int, timer: driver.Timer,
             kernels: list[str]) -> dict[str, tuple[float, int]]:
    """kernel name: (median µs a call, mismatched rows against the numpy sampler), on the same rows."""
    temp, top_p, top_k, masked, min_p, scratch = mode
    r = logits.shape[0]
    words = V // 32
    temps, tps = np.full(r, temp, np.float32), np.full(r, top_p, np.float32)
    tks = np.full(r, top_k, np.int32)
    seed = c.rng.integers(0, 2 ** 63, r).astype(np.uint64)
    step = c.rng.integers(0, 1000, r).astype(np.int64)
    ref_logits = logits
    mask_bits = mask_row = 0
    if masked:    # a fraction of the vocab allowed (1.0: every token, the mask read for nothing), or a count
        if isinstance(masked, int):
            allowed = np.zeros((r, V), bool)
            for j in range(r):
                allowed[j, c.rng.choice(V, masked, replace=False)] = True
        else:
            allowed = c.rng.random((r, V)) < masked
            allowed[np.arange(r), logits.argmax(axis=1)] = True
            if masked == 0.95:
                allowed[:, 2] = False       # EOS (inside a string, the text is not complete)
        ref_logits = np.where(allowed, logits, np.float32(-np.inf)).astype(np.float32)
        mask_bits = c.up(_pack_words(allowed))
        mask_row = c.up(np.arange(r, dtype=np.int32))
    mps = np.full(r, min_p, np.float32)
    ref = sampler.sample(ref_logits, SamplingRows(temps, tps, tks, seed, step, mps))
    dl = c.up(logits)
    adj_row = np.arange(r, dtype=np.int32) if scratch else np.full(r, -1, np.int32)
    args = (dl, c.up(np.arange(r, dtype=np.int32)), V, c.up(temps), c.up(tps), c.up(tks), c.up(seed),
            c.up(step.astype(np.uint64)), c.up(mps), c.up(adj_row), c.up(logits) if scratch else 0)
    result = {}
    for name in kernels:
        c.k.sample_split = KERNELS[name]
        c.k.sample_split_rows = 1 << 30          # (the kernel named, at every row count)
        out = c.zeros(r * 4)
        c.k.sample(*args, out, r, mask_bits, mask_row, words if masked else 0)
        got = c.down(out, (r,), np.int32)
        mism = int((got != ref).sum())
        times = []
        for _ in range(reps):
            timer.start(c.dev.stream)
            c.k.sample(*args, out, r, mask_bits, mask_row, words if masked else 0)
            times.append(timer.stop(c.dev.stream) * 1e3)
        result[name] = (statistics.median(times), mism)
    c.free()
    return result


def _pack_words(allowed: np.ndarray) -> np.ndarray:
    """bool [rows, V] -> uint32 [rows, V/32], bit v & 31 of word v >> 5 (kernels/token_mask.py's layout)."""
    r = allowed.shape[0]
    a = allowed.reshape(r, -1, 32).astype(np.uint64)
    return (a << np.arange(32, dtype=np.uint64)).sum(axis=2).astype(np.uint32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,64,256")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--kernels", default="block,split", help="block (sample_rows), split (sample_rows_split)")
    args = ap.parse_args(argv)
    c, timer = Ctx(), driver.Timer()
    rows_list = [int(x) for x in args.rows.split(",")]
    kernels = [k for k in args.kernels.split(",") if k]
    if any(k not in KERNELS for k in kernels) or not kernels:
        ap.error(f"--kernels takes {', '.join(KERNELS)}")
    cols = " | ".join(f"{k} µs | {k} ÷ greedy | {k} mismatched" for k in kernels)
    ratio = "block ÷ split" if kernels == ["block", "split"] else ""
    print(f"| rows | mode | {cols} |{f' {ratio} |' if ratio else ''}")
    print("|---:|---|" + "---:|" * (3 * len(kernels) + bool(ratio)))
    bad = 0
    for rows in rows_list:
        logits = model_like_logits(c.rng, rows)
        greedy: dict[str, float] = {}
        for name, mode in MODES.items():
            res = run_mode(c, logits, mode, args.reps, timer, kernels)
            cells = []
            for k in kernels:
                us, mism = res[k]
                greedy.setdefault(k, us)
                bad += mism
                cells.append(f"{us:.1f} | {us / greedy[k]:.2f} | {mism}")
            tail = f" {res['block'][0] / res['split'][0]:.2f} |" if ratio else ""
            print(f"| {rows} | {name} | {' | '.join(cells)} |{tail}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
