"""gpu-bench lines for the fused T <= 8 decode kernels (kernels/cuda/fused.cu): achieved GB/s per
kernel, and the decode step at batch 1/2/4/8 with the fused plan and with AOTX_FUSED=0's plan, in the
same process (graph replay, CUDA events; launches per step counted from the plan)."""
from __future__ import annotations

import numpy as np


def graph_seconds(st, timer, fn, reps=50) -> float:
    """Seconds per launch: ``reps`` launches captured in one graph (no Python launch gaps), replayed
    5 times, median (CUDA events: `timer`, a driver.Timer, on stream `st`)."""
    from kernels.cuda import driver

    fn()
    graph = driver.Graph(st, lambda: [fn() for _ in range(reps)])
    graph.launch(st)
    ts = []
    for _ in range(5):
        timer.start(st)
        graph.launch(st)
        ts.append(timer.stop(st) / reps)
    return float(np.median(ts)) * 1e-3


def step_launches_ms(backend, step_batch, b: int, ctx: int, st, timer) -> tuple[int, float]:
    """One decode step of batch b at context ctx through backend.forward's graph: (its launches, counting
    attention_combine after a split attention; milliseconds per replay, median of 5 x 20 replays)."""
    ps = backend.page_size
    backend.forward(step_batch([ctx] * b, ps, -(-ctx // ps) + 1, np.zeros(b, np.int32)))
    g = backend.last_graph
    g.launch(st)
    ts = []
    for _ in range(5):
        timer.start(st)
        for _ in range(20):
            g.launch(st)
        ts.append(timer.stop(st) / 20)
    nsplit = backend._nsplit(b, ctx)
    p = backend._stage(np.zeros(b), np.full(b, ctx - 1), np.full(b, -1), np.arange(b), np.full(b, ctx),
                       np.arange(b), np.zeros((b, 1), np.int32), 1)
    names = [name for name, _ in backend.plan(b, b, p, 1, nsplit)]
    n_launch = len(names) + (names.count("attention") if nsplit > 1 else 0)   # + attention_combine
    return n_launch, float(np.median(ts)) * 1e3


def kernel_rows(backend) -> list[tuple[str, float, str]]:
    from kernels.cuda import driver

    if not backend.k.fused_ok(backend.config.hidden, backend.config.ffn, backend.config.vocab_size):
        return [("fused kernels: shapes or occupancy refused", 0.0, "")]
    cfg, k, st, timer = backend.config, backend.k, backend.dev.stream, driver.Timer()
    H, F, V = cfg.hidden, cfg.ffn, cfg.vocab_size
    rows = []
    for t in (1, 8):
        ws = backend.layers   # every layer's weights in turn: nothing stays in L2 between launches
        state = {"i": 0}

        def mlp(t=t, ws=ws, state=state):
            w = ws[state["i"] % len(ws)]
            state["i"] += 1
            k.mlp_fused(backend.residual, w["ffn_norm"], cfg.rms_eps, w["wgu"], w["wdown"], backend.act,
                        H, F, t, backend.sync)
        s = graph_seconds(st, timer, mlp, reps=len(ws))
        rows.append((f"mlp_fused T={t} (gate/up {2 * F}x{H} + down {H}x{F})", 3 * F * H * 2 / s / 1e9,
                     f"GB/s (weights), {s * 1e6:.2f} us"))
        for store in (True, False):
            s = graph_seconds(st, timer, lambda t=t, store=store: k.lm_head_argmax(
                backend.residual, 0, backend.out_norm, cfg.rms_eps, backend.embed, V, H, t,
                backend.logits if store else 0, backend.sync + 8, backend.sync + 4, backend.sample_out), reps=20)
            rows.append((f"lm_head_argmax T={t} [{V}x{H}] logits {'stored' if store else 'not stored'}",
                         V * H * 2 / s / 1e9, f"GB/s (weights), {s * 1e6:.2f} us"))
    ps = backend.page_size
    for b, ctx in ((1, 288), (1, 2048), (8, 288)):
        npg = -(-ctx // ps)
        if b * npg > backend.num_pages:
            continue
        tables = (np.arange(b)[:, None] * npg + np.arange(npg)[None, :]).astype(np.int32)
        p = backend._stage(np.zeros(b), np.full(b, ctx - 1), np.full(b, -1), np.arange(b), np.full(b, ctx),
                           np.arange(b), tables, npg)
        nsplit = backend._nsplit(b, ctx)
        w = backend.layers[0]
        s = graph_seconds(st, timer, lambda b=b, p=p, npg=npg, nsplit=nsplit, w=w: k.attn_o_fused(
            backend.q, backend.k_cache, backend.v_cache, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps,
            backend.scale, b, cfg.n_kv_heads, nsplit, backend.attn, backend.part_o, backend.part_ml, w["wo"],
            backend.residual, H, backend.sync + 76, backend.sync + 72), reps=20)
        nbytes = b * ctx * cfg.kv_size * 2 * 2 + H * cfg.q_size * 2
        rows.append((f"attn_o_fused B={b} ctx={ctx} splits={nsplit}", nbytes / s / 1e9,
                     f"GB/s (K+V+Wo), {s * 1e6:.2f} us"))
    return rows


def step_rows(backend, step_batch, batches=(1, 2, 4, 8), ctx: int = 288) -> list[tuple[int, str, int, float]]:
    """(batch, plan, launches per step, us per step by graph replay): the default plan (the lean kernels,
    AOTX_LEAN=auto, where they run), the fused plan (AOTX_LEAN=0: attn_o_fused from T = 4), with
    attn_o_fused at every T (AOTX_FUSED_ATTN=1) and at none (=0), and the older plan (AOTX_FUSED=0)."""
    from kernels.cuda import driver
    from kernels.cuda.fused_policy import FUSED_ATTN_MIN_T, NEVER

    out = []
    timer, st = driver.Timer(), backend.dev.stream
    keep = backend.fused, backend.fused_attn_min_t, backend.lean
    plans = [("default", True, FUSED_ATTN_MIN_T, keep[2]), ("AOTX_LEAN=0", True, FUSED_ATTN_MIN_T, 0),
             ("AOTX_LEAN=0 FUSED_ATTN=1", True, 1, 0), ("AOTX_LEAN=0 FUSED_ATTN=0", True, NEVER, 0),
             ("AOTX_FUSED=0", False, NEVER, 0)]
    try:
        for label, fused, min_t, lean in plans if keep[0] else plans[4:]:
            backend.fused, backend.fused_attn_min_t, backend.lean = fused, min_t, lean
            for b in batches:
                ps = backend.page_size
                if b * (-(-ctx // ps) + 1) > backend.num_pages:
                    continue
                n_launch, ms = step_launches_ms(backend, step_batch, b, ctx, st, timer)
                out.append((b, label, n_launch, ms))
    finally:
        backend.fused, backend.fused_attn_min_t, backend.lean = keep
    return out


def main() -> int:
    """``python3 -m ops.gpu.fused_bench``: the fused kernels' lines alone, on random weights (a small
    program to run under ``ncu --clock-control none -k regex:mlp_fused``)."""
    from kernels import create_backend
    from ops.gpu.bench import _step_batch
    from ops.gpu.model_check import random_bundle

    backend = create_backend("cuda", random_bundle(), num_pages=8 * 19 + 16, page_size=16)
    for name, val, unit in kernel_rows(backend):
        print(f"kernel {name:<56} {val:9.1f} {unit}", flush=True)
    for b, label, n, us in step_rows(backend, _step_batch, batches=(1,)):
        print(f"decode step batch {b} {label:<18}: {us:7.1f} us/step, {n} launches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
