"""decode_attention (kernels/cuda/decode_attention.cu, every variant) beside paged_attention (attention.cu) in
one run, at decode shapes of the model (9 query heads / 3 KV heads, head dim 64, pages of 16 in a shuffled
pool): microseconds a launch and achieved GB/s of K+V read once (the bandwidth floor's measure: H100 HBM3
~3.35 TB/s, H200 ~4.8). Each timed graph cycles over 4 copies of the KV pool (one per launch, 4 x the data:
no copy stays in L2 between its launches, like a step's 30 layers). Then, with --model, a random-weights decode
step's op classes and generate tok/s at each batch with AOTX_DECODE_MMA off, on (the default variant: q and P
split into bf16 hi + lo) and on with the single-bf16 peer (session 11's rounding), the same backend.

    python -m ops.gpu.decode_attention_bench [--shapes 256x288,64x1024] [--model] [--batches 64,256] [--once]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("OPENBLAS_NUM_THREADS", "8")

NH, NKV, D, PAGE, COPIES = 9, 3, 64, 16, 4
SHAPES = "256x288,256x1024,128x288,64x288,64x1024,32x1024,16x288,16x2048"


def _old_nsplit(b: int, ctx: int, sm: int) -> int:
    """backend._nsplit's paged_attention rule (AOTX_DECODE_MMA=0, T > 8)."""
    chunks = -(-ctx // 128)
    want = -(-2 * sm // (b * NKV))
    p2 = lambda n: 1 << max(0, int(n) - 1).bit_length()   # noqa: E731
    return max(1, min(p2(want), p2(chunks), 16))


def kernel_rows(shapes, sweep: bool = True, once: bool = False) -> list[str]:
    """The kernel lines; ``once``: each kernel launched once, untimed (for ncu)."""
    from kernels.cuda import decode_plan, driver
    from kernels.cuda.decode_attention_twin import kv_bytes
    from ops.gpu.fused_bench import graph_seconds
    from ops.gpu.kernel_check import Ctx

    c = Ctx()
    st, timer, k = c.dev.stream, driver.Timer(), c.k
    sm = c.dev.sm_count
    rng = np.random.default_rng(5)
    lines = []

    def emit(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    emit(f"device {c.dev.name} ({c.dev.arch}, {sm} SMs) {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"resident blocks {k.decode_resident}")
    n_pages = max(b * -(-ctx // PAGE) for b, ctx in shapes) + 8
    slots = n_pages * PAGE
    kv = [(c.zeros(slots * NKV * D * 2, poison=False), c.zeros(slots * NKV * D * 2, poison=False))
          for _ in range(COPIES)]
    host = (rng.standard_normal(slots * NKV * D).astype(np.float32) * 0.5).astype(np.float32)
    bits = (host.view(np.uint32) >> 16).astype(np.uint16)   # finite bf16 values (scores of O(1))
    for kc, vc in kv:
        driver.htod(kc, bits, st)
        driver.htod(vc, bits, st)
    for b, ctx in shapes:
        npg = -(-ctx // PAGE)
        tables = rng.permutation(n_pages)[:b * npg].reshape(b, npg).astype(np.int32)
        q = c.up(rng.standard_normal((b, NH * D)).astype(np.float32))
        ts, pos, lens, bt = (c.up(np.arange(b, dtype=np.int32)), c.up(np.full(b, ctx - 1, np.int32)),
                             c.up(np.full(b, ctx, np.int32)), c.up(tables))
        out = c.zeros(b * NH * D * 2)
        po, pm = c.zeros(b * NH * 16 * D * 4), c.zeros(b * NH * 16 * 2 * 4)
        nbytes = kv_bytes([ctx] * b, NKV, D)
        it = [0]

        def nxt():
            it[0] = (it[0] + 1) % COPIES
            return kv[it[0]]

        def run_old(ns):
            kc, vc = nxt()
            k.attention(q, kc, vc, ts, pos, lens, bt, npg, PAGE, 0.125, b, NKV, NH, D, ns, out, po, pm)

        def run_new(v, ns):
            kc, vc = nxt()
            k.decode_attention(v, q, kc, vc, ts, pos, lens, bt, npg, PAGE, 0.125, b, NKV, NH, D, ns, out, po, pm)

        ns_old = _old_nsplit(b, ctx, sm)
        if once:
            run_old(ns_old)
            for v in decode_plan.VARIANTS.values():
                run_new(v, decode_plan.nsplit(v, b, ctx, NKV, sm))
            c.dev.synchronize()
            continue
        base = graph_seconds(st, timer, lambda: run_old(ns_old), 20)
        emit(f"B={b} ctx={ctx} paged_attention splits={ns_old}: {base * 1e6:7.1f} us "
                     f"{nbytes / base / 1e9:7.1f} GB/s (K+V) 1.00x")
        for v in decode_plan.VARIANTS.values():
            plan = decode_plan.nsplit(v, b, ctx, NKV, sm)
            tries = sorted({plan, 1, 2, 4, 8} if sweep and v.name == decode_plan.DEFAULT_VARIANT else {plan, 1})
            for ns in tries:
                if ns > -(-ctx // v.keys):
                    continue
                s = graph_seconds(st, timer, lambda v=v, ns=ns: run_new(v, ns), 20)
                emit(f"B={b} ctx={ctx} decode_attention {v.name} splits={ns}{' (plan)' if ns == plan else ''}: "
                     f"{s * 1e6:7.1f} us {nbytes / s / 1e9:7.1f} GB/s (K+V) {base / s:4.2f}x")
    c.free()
    return lines


def model_rows(batches) -> list[str]:
    """Random-weights decode step (context 288): op classes and generate tok/s, AOTX_DECODE_MMA off, on, and on
    with the single-bf16 peer variant."""
    from kernels import create_backend
    from kernels.cuda import decode_plan
    from ops.gpu.bench import NEW, PROMPT_LEN, ours_generate, step_breakdown
    from ops.gpu.model_check import random_bundle

    bundle = random_bundle()
    cfg = bundle.config
    backend = create_backend("cuda", bundle, num_pages=max(batches) * 19 + 64, page_size=16)
    rng = np.random.default_rng(0)
    lines = []
    for b in batches:
        prompts = rng.integers(3, cfg.vocab_size, (b, PROMPT_LEN)).astype(np.int32)
        for label, v in (("off", None), ("on", decode_plan.VARIANTS[decode_plan.DEFAULT_VARIANT]),
                         ("on, single bf16", decode_plan.VARIANTS[decode_plan.SINGLE_BF16_PEER])):
            backend.decode_mma = v
            parts = step_breakdown(backend, b)
            att = sum(us for name, _, us in parts if name.startswith("attention"))
            total = sum(us for _, _, us in parts)
            ours_generate(backend, prompts, 8)
            dt, _ = ours_generate(backend, prompts, NEW)
            new = [f"model b={b} AOTX_DECODE_MMA {label}: attention {att:7.1f} us (30 layers), sum of op "
                   f"classes {total:7.1f} us, generate {b * NEW / dt:9.0f} tok/s"]
            new += [f"    {name:<26} x{n:<3} {us:8.1f} us" for name, n, us in parts]
            print("\n".join(new), flush=True)
            lines += new
    backend.decode_mma = None
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--model", action="store_true")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--once", action="store_true", help="each kernel once, untimed (under ncu)")
    args = ap.parse_args(argv)
    from kernels.cuda.probe import gpu_present

    if not gpu_present():
        print("decode_attention_bench needs an NVIDIA GPU", file=sys.stderr)
        return 2
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
    kernel_rows(shapes, not args.no_sweep, args.once)
    if args.model:
        model_rows([int(x) for x in args.batches.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
