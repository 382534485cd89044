"""What each fused epilogue of linear_wgmma costs, and whether per-op-class timing tells a prefill step's time.

    python -m ops.gpu.epilogue_bench [--ts 64,256,1024] [--prompt 1024]

* epilogue rows: each projection of SmolLM2-135M at T = 64 / 256 / 1,024 with its real epilogue (qkv: EPI_QKV,
  positions 0..T-1, slots 0..T-1 into layer 0's caches, the backend's rope table; o and down: EPI_ADD into the
  residual stream; gate_up: EPI_SWIGLU into the bf16 activations), against EPI_STORE (float32 out) on the
  same tile (the plan's pick, TMA loads, as the backend runs it) in the same run. Method of
  ops.gpu.wgmma_bench: 50 launches in one CUDA graph, the weights rotating over the 30 layers', median of 5
  replays. Printed: us a launch, TFLOP/s, and the epilogue's extra us over EPI_STORE.
* prefill rows: one prompt of --prompt tokens (flash_prefill and wgmma as the backend is configured):
  (a) the sum of its op classes, each class alone in a graph (prefill_bench's breakdown);
  (b) the 30 layers' ops in program order in one graph, with no event between ops (per layer: / 30);
  (c) the whole step (embedding .. LM head) in one graph;
  (d) the step launched directly as forward() does (no graph): the host's enqueue time (Python + driver, until
      the last launch returns) and the wall time to the end of the step; median of 5 after a warm-up.
  (c) and (d) each without programmatic dependent launch (how the backend runs a prefill) and with it;
  (e) backend.forward() as the engine calls it, host time until it returns and wall time, with the step's
      graph replayed (kernels/cuda/step_graphs.py) and eager.
  (d) above (c) by more than a few percent means the host's launches, not the kernels, set the prefill time.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ops.gpu.fused_bench import graph_seconds


def epilogue_rows(backend, ts=(64, 256, 1024)) -> list[str]:
    from kernels.cuda import driver, launchers as L, wgmma_plan
    from kernels.cuda.twins import to_bf16
    from ops.gpu.wgmma_bench import _wgmma

    cfg, st, timer = backend.config, backend.dev.stream, driver.Timer()
    H, F, tmax = cfg.hidden, cfg.ffn, max(ts)
    wg = _wgmma(backend)
    rng = np.random.default_rng(1)
    a_in = driver.Buffer(tmax * F * 2)          # random bf16 activations, wide enough for down's K = F
    driver.htod(a_in.ptr, to_bf16(rng.standard_normal(tmax * F).astype(np.float32)), st)
    store = driver.Buffer(tmax * 2 * F * 4)
    ints = driver.Buffer(2 * tmax * 4)          # positions 0..T-1, then slots 0..T-1
    driver.htod(ints.ptr, np.concatenate([np.arange(tmax), np.arange(tmax)]).astype(np.int32), st)
    driver.htod(backend.residual, rng.standard_normal(tmax * H).astype(np.float32), st)
    qkv = L.epi(L.EPI_QKV, out_f32=backend.q, positions=ints.ptr, rope=backend.rope, slots=ints.ptr + 4 * tmax,
                k_cache=backend.k_cache, v_cache=backend.v_cache, head_dim=cfg.head_dim, q_size=cfg.q_size,
                kv_size=cfg.kv_size)
    add = L.epi(L.EPI_ADD, out_f32=backend.residual, ld=H)
    ops = (("qkv", "wqkv", backend.qkv_n, H, qkv), ("o", "wo", H, cfg.q_size, add),
           ("gate_up", "wgu", 2 * F, H, L.epi(L.EPI_SWIGLU, out_bf16=backend.act, ld=F)), ("down", "wdown", H, F, add))
    lines = []
    try:
        for name, key, n, k, e in ops:
            ws = [lay[key] for lay in backend.layers]
            for t in ts:
                if t > backend.t_cap:
                    continue
                pick = wgmma_plan.choose(t, n, backend.dev.sm_count, k)
                variant = pick.replace("linear_wgmma_", wgmma_plan.TMA_PREFIX) if wg.tma else pick

                def seconds(epi):
                    state = {"i": 0}

                    def fn():
                        wg.launch(a_in.ptr, t, ws[state["i"] % len(ws)], n, k, epi, variant)
                        state["i"] += 1
                    return graph_seconds(st, timer, fn)
                base = seconds(L.epi(L.EPI_STORE, out_f32=store.ptr, ld=n))
                real = seconds(e)
                flops = 2 * t * n * k
                lines.append(f"epilogue {name:<8} T={t:<5} {variant:<26} EPI_STORE {base * 1e6:7.2f} us "
                             f"({flops / base / 1e12:5.1f} TFLOP/s)  {_MODE[e.mode]:<10} {real * 1e6:7.2f} us "
                             f"({flops / real / 1e12:5.1f} TFLOP/s)  epilogue +{(real - base) * 1e6:6.2f} us "
                             f"({real / base:.2f}x)")
    finally:
        for b in (a_in, store, ints):
            b.free()
    return lines


_MODE = {0: "EPI_STORE", 1: "EPI_ADD", 2: "EPI_SWIGLU", 3: "EPI_QKV"}


def _median_graph_ms(st, fns, reps: int = 5) -> float:
    from kernels.cuda import driver

    timer = driver.Timer()
    graph = driver.Graph(st, lambda: [f() for f in fns])
    graph.launch(st)
    ts = []
    for _ in range(reps):
        timer.start(st)
        graph.launch(st)
        ts.append(timer.stop(st))
    return float(np.median(ts))


def prefill_rows(backend, n: int = 1024) -> list[str]:
    from ops.gpu.bench import op_classes
    from ops.gpu.prefill_bench import _staged

    st = backend.dev.stream
    batch, _ = _staged(backend, [(n, n)])
    p, width, nsplit = backend.stage(batch)
    plan = backend.plan(n, 1, p, width, nsplit)
    classes = op_classes(backend, plan)
    lines = [f"prefill {n} (a) {name:<22} x{cnt:<3} {us:8.1f} us" for name, cnt, us in classes]
    total_a = sum(us for _, _, us in classes)
    lines.append(f"prefill {n} (a) sum of op classes, each alone in a graph {total_a:8.1f} us")
    layers = [fn for _, fn in plan[1:len(plan) - _tail(plan)]]
    b_ms = _median_graph_ms(st, layers)
    lines.append(f"prefill {n} (b) the 30 layers' {len(layers)} ops in one graph {b_ms * 1e3:8.1f} us "
                 f"({b_ms * 1e3 / backend.config.n_layers:.1f} us a layer)")
    k, c_ms, d_wall = backend.k, {}, {}
    for pdl in (False, True):   # the backend launches a prefill without PDL (k.pdl only for t <= 8)
        k.pdl = pdl
        try:
            c_ms[pdl] = _median_graph_ms(st, [fn for _, fn in plan])
            host, wall = [], []
            for i in range(6):
                backend.dev.synchronize()
                t0 = time.perf_counter()
                for _, fn in plan:
                    fn()
                t1 = time.perf_counter()
                backend.dev.synchronize()
                t2 = time.perf_counter()
                if i:
                    host.append(t1 - t0)
                    wall.append(t2 - t0)
        finally:
            k.pdl = False
        d_wall[pdl] = float(np.median(wall))
        tag = "PDL on " if pdl else "PDL off"
        lines.append(f"prefill {n} (c) {tag} the whole step ({len(plan)} launches) in one graph "
                     f"{c_ms[pdl] * 1e3:8.1f} us")
        lines.append(f"prefill {n} (d) {tag} launched directly: host enqueue {np.median(host) * 1e6:8.1f} us "
                     f"({np.median(host) * 1e6 / len(plan):.1f} us a launch), wall to the step's end "
                     f"{d_wall[pdl] * 1e6:8.1f} us")
    lines += _forward_rows(backend, n, c_ms[False])
    lines.append(f"prefill {n}: (c) / (a) = {c_ms[False] * 1e3 / total_a:.2f}; (d) wall / (c), PDL off "
                 f"{d_wall[False] * 1e3 / c_ms[False]:.2f}; PDL on / off: graph {c_ms[True] / c_ms[False]:.2f}, "
                 f"direct {d_wall[True] / d_wall[False]:.2f}")
    return lines


def _forward_rows(backend, n: int, c_ms: float) -> list[str]:
    """(e) backend.forward() of the n-token prompt as the engine calls it (the StepBatch built, staged and
    launched): the host's time until forward returns, and the wall time to the step's end, with the step's
    graph replayed (kernels/cuda/step_graphs.py) and with every launch eager; median of 5 after warm-ups."""
    from ops.gpu.bench import _step_batch

    prompt = np.random.default_rng(2).integers(3, backend.config.vocab_size, (1, n)).astype(np.int32)
    npg = -(-n // backend.page_size)
    keep, lines = backend.step_graphs.enabled, []
    try:
        for graphs in (True, False):
            backend.step_graphs.enabled = graphs
            host, wall = [], []
            for i in range(7):
                backend.dev.synchronize()
                t0 = time.perf_counter()
                backend.forward(_step_batch([n], backend.page_size, npg, prompt, n))
                t1 = time.perf_counter()
                backend.dev.synchronize()
                t2 = time.perf_counter()
                if i >= 2:   # (the first two: eager, then the capture)
                    host.append(t1 - t0)
                    wall.append(t2 - t0)
            tag = "step graph" if graphs else "eager     "
            lines.append(f"prefill {n} (e) forward(), {tag}: host until it returns {np.median(host) * 1e6:8.1f} us, "
                         f"wall to the step's end {np.median(wall) * 1e6:8.1f} us ({np.median(wall) * 1e3 / c_ms:.2f}x "
                         f"the step's graph time (c))")
    finally:
        backend.step_graphs.enabled = keep
    return lines


def _tail(plan) -> int:
    """Launches after the last layer (the final norm and LM head)."""
    names = [name for name, _ in plan]
    last_down = max(i for i, nm in enumerate(names) if nm == "down+residual")
    return len(plan) - 1 - last_down


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ts", default="64,256,1024")
    ap.add_argument("--prompt", type=int, default=1024)
    args = ap.parse_args(argv)
    from kernels import create_backend
    from kernels.cuda.probe import gpu_present
    from ops.gpu.model_check import random_bundle
    from ops.gpu.prefill_bench import PAGES

    if not gpu_present():
        print("epilogue_bench needs an NVIDIA GPU", file=sys.stderr)
        return 2
    backend = create_backend("cuda", random_bundle(), num_pages=PAGES, page_size=16)
    print(f"device {backend.dev.name} ({backend.dev.arch}, {backend.dev.sm_count} SMs), flash {backend.flash}, "
          f"wgmma {'tma' if backend.k.wgmma is not None and backend.k.wgmma.tma else backend.k.wgmma is not None}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    for line in epilogue_rows(backend, tuple(int(x) for x in args.ts.split(",") if x)):
        print(line, flush=True)
    for line in prefill_rows(backend, args.prompt):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
