"""GEMM rates of linear_wgmma (AOTX_WGMMA, kernels/cuda/linear_wgmma.cu) against linear_mma, same process.

    python -m ops.gpu.wgmma_bench [--real] [--batches 64,256]

* kernel rows: each projection of SmolLM2-135M at T = 64, 256, 1,024 (the LM head at 64 / 256), EPI_STORE
  (float32 out), TFLOP/s = 2 T N K / time; linear_mma as the backend picks its tile, every linear_wgmma
  variant with cp.async and with TMA loads (wgmma_plan.ALL_VARIANTS), the tile wgmma_plan.choose picks marked. Time: 50 launches in one CUDA graph (no launch gaps),
  median of 5 replays; the weights rotate over the 30 layers' (nothing L2-resident that would not be in a
  step; the LM head's 57 MB is larger than L2 anyway).
* step rows: the op classes of one decode step at batch 256 (context 288): linear_mma, linear_wgmma,
  linear_wgmma_tma (AOTX_WGMMA=0 / 1 / tma), same backend.
* generate rows: tok/s of the backend's generate loop (bench.ours_generate, 32-token prompts, 256 new
  tokens) at the given batches in the same three modes, same backend, graphs recaptured.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("OPENBLAS_NUM_THREADS", "8")


def _wgmma(backend):
    """The backend's linear_wgmma, or one loaded for the bench (kept on the backend) when the switch is off."""
    from kernels.cuda import wgmma_plan

    if backend.k.wgmma is not None:
        return backend.k.wgmma
    if getattr(backend, "_bench_wgmma", None) is None:
        backend._bench_wgmma = wgmma_plan.Wgmma(backend.k)
    return backend._bench_wgmma


def kernel_rows(backend) -> list[tuple[str, float, str]]:
    from kernels.cuda import driver, launchers as L, wgmma_plan
    from kernels.cuda.twins import to_bf16
    from ops.gpu.fused_bench import graph_seconds

    cfg, k, st, timer = backend.config, backend.k, backend.dev.stream, driver.Timer()
    H, F, V = cfg.hidden, cfg.ffn, cfg.vocab_size
    wg = _wgmma(backend)
    saved, k.wgmma = k.wgmma, None                  # k.mma below: linear_mma whatever the switch says
    out = driver.Buffer(1024 * V * 4)
    a_in = driver.Buffer(1024 * F * 2)              # random bf16 activations (zeros would flatter the power)
    driver.htod(a_in.ptr, to_bf16(np.random.default_rng(1).standard_normal(1024 * F).astype(np.float32)), st)
    rows = []
    try:
        for name, key, n, kk in (("qkv", "wqkv", backend.qkv_n, H), ("o", "wo", H, cfg.q_size),
                                 ("gate_up", "wgu", 2 * F, H), ("down", "wdown", H, F), ("lm_head", None, V, H)):
            ws = [backend.embed] if key is None else [lay[key] for lay in backend.layers]
            e = L.epi(L.EPI_STORE, out_f32=out.ptr, ld=n)
            for t in ((64, 256) if key is None else (64, 256, 1024)):
                flops = 2 * t * n * kk

                def rate(launch):
                    state = {"i": 0}

                    def fn():
                        launch(ws[state["i"] % len(ws)])
                        state["i"] += 1
                    return flops / graph_seconds(st, timer, fn) / 1e12

                base = rate(lambda w: k.mma(a_in.ptr, t, w, n, kk, e))
                rows.append((f"linear_mma   {name} [{n}x{kk}] T={t}", base, "TFLOP/s"))
                pick = wgmma_plan.choose(t, n, backend.dev.sm_count, kk)
                for v in wgmma_plan.ALL_VARIANTS:
                    r = rate(lambda w, v=v: wg.launch(a_in.ptr, t, w, n, kk, e, v))
                    mark = " <- plan" if v.replace("_tma_", "_") == pick else ""
                    rows.append((f"{v} {name} [{n}x{kk}] T={t}{mark}", r, f"TFLOP/s ({r / base:.2f}x linear_mma)"))
    finally:
        k.wgmma = saved
        out.free()
        a_in.free()
    return rows


MODES = (("linear_mma", None), ("linear_wgmma", False), ("linear_wgmma_tma", True))


def _set_mode(backend, tma):
    """The backend's GEMMs: linear_mma (tma None), linear_wgmma (False) or linear_wgmma_tma (True)."""
    if tma is None:
        backend.k.wgmma = None
    else:
        backend.k.wgmma = _wgmma(backend)
        backend.k.wgmma.tma = tma


def step_rows(backend, b: int = 256) -> list[str]:
    from ops.gpu.bench import step_breakdown

    lines = []
    saved = backend.k.wgmma
    saved_tma = saved.tma if saved is not None else False
    for label, tma in MODES:
        _set_mode(backend, tma)
        total = 0.0
        for name, n, us in step_breakdown(backend, b):
            total += us
            lines.append(f"step b={b} {label:<16} {name:<26} x{n:<3} {us:8.1f} us")
        lines.append(f"step b={b} {label:<16} sum of op classes {total:.1f} us")
    backend.k.wgmma = saved
    if saved is not None:
        saved.tma = saved_tma
    return lines


def generate_rows(backend, batches) -> list[str]:
    from ops.gpu.bench import NEW, PROMPT_LEN, ours_generate

    rng = np.random.default_rng(0)
    saved, lines = backend.k.wgmma, []
    saved_tma = saved.tma if saved is not None else False
    for b in batches:
        prompts = rng.integers(3, backend.config.vocab_size, (b, PROMPT_LEN)).astype(np.int32)
        got, rate = {}, {}
        for label, tma in MODES:
            _set_mode(backend, tma)
            backend.graphs = {}                      # graphs captured with the other GEMMs
            ours_generate(backend, prompts, 8)
            dt, got[label] = ours_generate(backend, prompts, NEW)
            rate[label] = b * NEW / dt
            lines.append(f"generate batch {b} {label:<16} {rate[label]:9.0f} tok/s "
                         f"({rate[label] / rate['linear_mma']:.2f}x linear_mma)")
        for label in ("linear_wgmma", "linear_wgmma_tma"):
            same = float((got["linear_mma"] == got[label]).mean())
            lines.append(f"generate batch {b}: {label} greedy tokens equal to linear_mma's in {same:.1%} of places")
    backend.k.wgmma, backend.graphs = saved, {}
    if saved is not None:
        saved.tma = saved_tma
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--skip-generate", action="store_true")
    args = ap.parse_args(argv)
    from kernels import create_backend
    from kernels.cuda.probe import gpu_present

    if not gpu_present():
        print("wgmma_bench needs an NVIDIA GPU", file=sys.stderr)
        return 2
    if args.real:
        from kernels import load_model
        bundle = load_model(progress=False)
    else:
        from ops.gpu.model_check import random_bundle
        bundle = random_bundle()
    batches = [int(x) for x in args.batches.split(",") if x]
    backend = create_backend("cuda", bundle, num_pages=max(batches + [1]) * 18 + 64, page_size=16)
    print(f"device {backend.dev.name} ({backend.dev.arch}, {backend.dev.sm_count} SMs), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    for name, val, unit in kernel_rows(backend):
        print(f"kernel {name:<52} {val:7.1f} {unit}", flush=True)
    for line in step_rows(backend):
        print(line, flush=True)
    if not args.skip_generate:
        for line in generate_rows(backend, batches):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
