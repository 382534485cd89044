"""gpu-check lines for kernels/cuda/step_graphs.py: a prefill step replayed from its graph gives exactly what the
same step launched eagerly gives.

For each step shape (a 300-token prompt with its last row's logits; two prompts of 200 and 77 tokens with
logits at 12 rows, the LM head past the fused T <= 8 path), the same step runs three times on the same
backend: eagerly (first sight), captured and launched (second), replayed (third); the token ids, positions and
slots are the same, so the logits and the K/V written (both zeroed before each run) must be bitwise equal
across the three. Recorded: the fraction of equal logits and of equal K/V cache bytes (threshold 1.0), and
that exactly one capture and one replay happened per shape.

    python -m ops.gpu.step_graphs_check
"""
from __future__ import annotations

import sys

import numpy as np


def _steps(rng, vocab):
    from ops.gpu.bench import _step_batch
    from kernels import StepBatch

    one = _step_batch([300], 16, 19, rng.integers(3, vocab, (1, 300)).astype(np.int32), 300)
    lens = [200, 77]
    tables = np.array([np.arange(13), np.arange(13, 26)], np.int32)
    pos = np.concatenate([np.arange(n) for n in lens]).astype(np.int32)
    seq = np.repeat(np.arange(2), lens)
    slots = (tables[seq, pos // 16] * 16 + pos % 16).astype(np.int32)
    qs = np.array([0, 200, 277], np.int32)
    rows = np.concatenate([np.arange(190, 200), [275, 276]]).astype(np.int32)   # 12 logits rows
    two = StepBatch(rng.integers(3, vocab, 277).astype(np.int32), pos, qs, np.array(lens, np.int32), tables, slots,
                    rows)
    return (("prompt 300", one), ("2 prompts 200+77, 12 logits rows", two))


def run(bundle, record) -> None:
    from kernels import create_backend
    from kernels.cuda import driver

    backend = create_backend("cuda", bundle, num_pages=64, page_size=16)
    cfg = backend.config
    rng = np.random.default_rng(3)
    kv_bytes = backend.layer_kv_bytes * cfg.n_layers
    for name, batch in _steps(rng, cfg.vocab_size):
        got = []
        before = (backend.step_graphs.captures, backend.step_graphs.replays)
        for _ in range(3):   # outputs zeroed first: a graph that ran nothing would leave zeros
            for ptr, nbytes in ((backend.k_cache, kv_bytes), (backend.v_cache, kv_bytes),
                                (backend.logits, backend.r_cap * cfg.vocab_size * 4)):
                driver.memset0(ptr, nbytes, backend.dev.stream)
            logits = np.array(backend.forward(batch))
            caches = [driver.dtoh(np.empty(kv_bytes, np.uint8), ptr, backend.dev.stream)
                      for ptr in (backend.k_cache, backend.v_cache)]
            got.append((logits, caches))
        same_logits = min(float((got[0][0] == g[0]).mean()) for g in got[1:])
        same_kv = min(float((got[0][1][i] == g[1][i]).mean()) for g in got[1:] for i in (0, 1))
        record(f"step graph {name}: logits of capture / replay == eager (fraction)", same_logits, 1.0)
        record(f"step graph {name}: K/V cache of capture / replay == eager (fraction)", same_kv, 1.0)
        captures = backend.step_graphs.captures - before[0]
        replays = backend.step_graphs.replays - before[1]
        record(f"step graph {name}: 1 capture and 1 replay in 3 steps", float(captures == 1 and replays == 1), 1.0,
               f"captures {captures}, replays {replays}")


def main() -> int:
    from kernels.cuda.probe import gpu_present
    from ops.gpu.model_check import random_bundle

    if not gpu_present():
        print("step_graphs_check needs an NVIDIA GPU", file=sys.stderr)
        return 2
    failed = []

    def record(name, value, thr, extra=""):
        ok = value >= thr
        print(f"{'PASS' if ok else 'FAIL'} {name:<72} {value:.5f} thr={thr} {extra}", flush=True)
        if not ok:
            failed.append(name)

    run(random_bundle(), record)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
