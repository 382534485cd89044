"""``python3 -m ops.gpu.lean_bench``: the lean T <= 8 kernels (kernels/cuda/lean.cu, AOTX_LEAN=1) beside
the kernels they replace, in one process on random weights of the model's shapes.

Per kernel, T = 1, 2, 4, 8: us per launch (30 launches in one graph, each on the next layer's weights so
nothing stays in L2, median of 5 replays; PDL on, as in a step) and GB/s over the bytes it must read
(weights; K/V for attention):
  qkv:        linear_gemv (norm+qkv+rope+kv_write)          vs qkv_lean
  attn half:  paged_attention + attention_combine + gemv O  vs attn_o_fused  vs lean attention + o_lean
  mlp:        mlp_fused                                     vs mlp_lean
  attention + MLP of a layer: the lean attention + o_lean + mlp_lean (AOTX_LEAN=1, 3 launches) vs the
              merged attention + omlp_lean (AOTX_LEAN=2, 2 launches) vs the merged attention + omlpq_lean
              (AOTX_LEAN=3, 2 launches that also do the next layer's qkv; T <= 4)
Then the decode step by graph replay at batch 1/2/4/8 (context 288), default plan against AOTX_LEAN=1..3,
the same at context 2,048 (batch 1, 2), and each op class of a batch-1 step timed alone
(ops.gpu.bench.step_breakdown) for the four plans."""
from __future__ import annotations

import numpy as np

from ops.gpu.fused_bench import graph_seconds, step_launches_ms


def _per_layer(backend, fn):
    state = {"i": 0}

    def go():
        w = backend.layers[state["i"] % len(backend.layers)]
        li = state["i"] % len(backend.layers)
        state["i"] += 1
        fn(w, li)
    return go


def kernel_rows(backend, ts=(1, 2, 4, 8), ctx=288) -> list[tuple[str, float, str]]:
    """The per-kernel rows at context ``ctx`` (and the attention half at 2,048 keys for T = 1)."""
    return _kernel_rows(backend, ts, ctx) + _kernel_rows(backend, (1,), 2048, attention_only=True)


def _kernel_rows(backend, ts, ctx, attention_only=False) -> list[tuple[str, float, str]]:
    from kernels.cuda import driver, launchers as L
    from kernels.cuda.launchers import QkvNext
    from kernels.cuda.lean_plan import OMLPQ_MAX_T, lean_nsplit

    cfg, k, st, timer, be = backend.config, backend.k, backend.dev.stream, driver.Timer(), backend
    H, F, eps, ps = cfg.hidden, cfg.ffn, cfg.rms_eps, backend.page_size
    nl = len(backend.layers)
    rows = []
    k.pdl = True
    try:
        for t in ts:
            npg = -(-ctx // ps)
            tables = (np.arange(t)[:, None] * npg + np.arange(npg)[None, :]).astype(np.int32)
            p = backend._stage(np.zeros(t), np.full(t, ctx - 1), np.arange(t) * npg * ps + ctx - 1, np.arange(t),
                               np.full(t, ctx), np.arange(t), tables, npg)
            kv_at = lambda li: (backend.k_cache + li * backend.layer_kv_bytes,  # noqa: E731
                                backend.v_cache + li * backend.layer_kv_bytes)
            wq_bytes = backend.qkv_n * H * 2
            e_of = lambda li: L.epi(L.EPI_QKV, out_f32=be.q, positions=p["positions"], rope=be.rope,  # noqa: E731
                                    slots=p["slots"], k_cache=kv_at(li)[0], v_cache=kv_at(li)[1],
                                    head_dim=cfg.head_dim, q_size=cfg.q_size, kv_size=cfg.kv_size)
            old = graph_seconds(st, timer, _per_layer(be, lambda w, li: k.gemv(
                be.residual, 1, 0, w["attn_norm"], eps, w["wqkv"], be.qkv_n, H, t, e_of(li))), reps=nl)
            new = graph_seconds(st, timer, _per_layer(be, lambda w, li: k.qkv_lean(
                be.residual, w["attn_norm"], eps, w["wqkv"], be.qkv_n, H, t, p["positions"], be.rope, p["slots"],
                be.q, *kv_at(li), cfg.head_dim, cfg.q_size, cfg.kv_size)), reps=nl)
            for name, s in (("linear_gemv qkv", old), ("qkv_lean", new)):
                if not attention_only:
                    rows.append((f"T={t} {name} [{be.qkv_n}x{H}]", wq_bytes / s / 1e9, f"GB/s, {s * 1e6:6.2f} us"))
            att_bytes = t * ctx * cfg.kv_size * 2 * 2 + H * cfg.q_size * 2
            ns_old = _default_nsplit(be, t, ctx)
            e_add = L.epi(L.EPI_ADD, out_f32=be.residual, ld=H)

            def three(w, li, ns=ns_old):
                kc, vc = kv_at(li)
                k.attention(be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps, be.scale, t,
                            cfg.n_kv_heads, cfg.n_heads, cfg.head_dim, ns, be.attn, be.part_o, be.part_ml)
                k.linear(be.attn, t, w["wo"], H, cfg.q_size, e_add)

            def ao(w, li, ns=ns_old):
                kc, vc = kv_at(li)
                k.attn_o_fused(be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps, be.scale, t,
                               cfg.n_kv_heads, ns, be.attn, be.part_o, be.part_ml, w["wo"], be.residual, H,
                               be.sync + 76, be.sync + 72)
            s = graph_seconds(st, timer, _per_layer(be, three), reps=nl)
            rows.append((f"T={t} attention+combine+o (3 kernels) ctx={ctx} splits={ns_old}", att_bytes / s / 1e9,
                         f"GB/s, {s * 1e6:6.2f} us"))
            s = graph_seconds(st, timer, _per_layer(be, ao), reps=nl)
            rows.append((f"T={t} attn_o_fused ctx={ctx} splits={ns_old}", att_bytes / s / 1e9, f"GB/s, {s * 1e6:6.2f} us"))
            ns_plan = lean_nsplit(t, ctx, cfg.n_kv_heads, be.dev.sm_count)
            for ns, prefetch in [(1, True), (2, True), (4, True), (8, True), (ns_plan, False)]:
                def lean(w, li, ns=ns):
                    kc, vc = kv_at(li)
                    k.lean_attention(be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps, be.scale,
                                     t, cfg.n_kv_heads, ns, be.attn, be.part_o, be.part_ml)
                    k.o_lean(be.attn, be.part_o, be.part_ml, ns, cfg.n_heads, w["wo"], be.residual, H, t)
                k.lean_prefetch = prefetch
                try:
                    s = graph_seconds(st, timer, _per_layer(be, lean), reps=nl)
                finally:
                    k.lean_prefetch = True
                rows.append((f"T={t} lean attention+o_lean ctx={ctx} splits={ns} prefetch={int(prefetch)}",
                             att_bytes / s / 1e9, f"GB/s, {s * 1e6:6.2f} us"))
            if attention_only:
                continue
            s = graph_seconds(st, timer, _per_layer(be, lambda w, li: k.mlp_fused(
                be.residual, w["ffn_norm"], eps, w["wgu"], w["wdown"], be.act, H, F, t, be.sync)), reps=nl)
            rows.append((f"T={t} mlp_fused", 3 * F * H * 2 / s / 1e9, f"GB/s, {s * 1e6:6.2f} us"))
            s = graph_seconds(st, timer, _per_layer(be, lambda w, li: k.mlp_lean(
                be.residual, w["ffn_norm"], eps, w["wgu"], w["wdown"], be.act, H, F, t, be.sync)), reps=nl)
            rows.append((f"T={t} mlp_lean", 3 * F * H * 2 / s / 1e9, f"GB/s, {s * 1e6:6.2f} us"))
            ns = lean_nsplit(t, ctx, cfg.n_kv_heads, be.dev.sm_count)
            layer_bytes = att_bytes + 3 * F * H * 2

            def half1(w, li, ns=ns):   # AOTX_LEAN=1's attention + MLP: 3 launches
                kc, vc = kv_at(li)
                k.lean_attention(be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps, be.scale,
                                 t, cfg.n_kv_heads, ns, be.attn, be.part_o, be.part_ml)
                k.o_lean(be.attn, be.part_o, be.part_ml, ns, cfg.n_heads, w["wo"], be.residual, H, t)
                k.mlp_lean(be.residual, w["ffn_norm"], eps, w["wgu"], w["wdown"], be.act, H, F, t, be.sync)

            def half2(w, li, ns=ns):   # AOTX_LEAN=2's: 2 launches
                kc, vc = kv_at(li)
                k.lean_attention_merged(be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps,
                                        be.scale, t, cfg.n_kv_heads, ns, be.attn, be.part_o, be.part_ml, be.sync + 76)
                k.omlp_lean(be.residual, w["ffn_norm"], eps, w["wgu"], w["wdown"], be.act, H, F, t, be.sync, be.attn,
                            w["wo"], cfg.q_size)
            def half3(w, li, ns=ns):   # AOTX_LEAN=3's: the merged attention and omlpq (the next layer's qkv)
                kc, vc = kv_at(li)
                wn, nxt_li = be.layers[(li + 1) % nl], (li + 1) % nl
                k.lean_attention_merged(be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], npg, ps,
                                        be.scale, t, cfg.n_kv_heads, ns, be.attn, be.part_o, be.part_ml, be.sync + 76)
                k.omlpq_lean(be.residual, w["ffn_norm"], eps, w["wgu"], w["wdown"], be.act, H, F, t, be.sync, be.attn,
                             w["wo"], cfg.q_size, QkvNext(wn["wqkv"], wn["attn_norm"], p["positions"], be.rope,
                                                          p["slots"], be.q, *kv_at(nxt_li), be.qkv_n, cfg.head_dim,
                                                          cfg.q_size, cfg.kv_size))
            halves = [("lean attention+o_lean+mlp_lean (AOTX_LEAN=1)", half1),
                      ("merged attention+omlp_lean (AOTX_LEAN=2)", half2)]
            if t <= OMLPQ_MAX_T:   # (its bytes: + the next layer's qkv weights)
                halves.append(("merged attention+omlpq_lean (AOTX_LEAN=3, + next qkv)", half3))
            for name, fn in halves:
                s = graph_seconds(st, timer, _per_layer(be, fn), reps=nl)
                rows.append((f"T={t} {name} splits={ns}", layer_bytes / s / 1e9, f"GB/s, {s * 1e6:6.2f} us"))
    finally:
        k.pdl = False
    return rows


def step_rows(backend, step_batch, batches=(1, 2, 4, 8), ctx=288) -> list[tuple[int, str, int, float]]:
    """(batch, plan, launches, us per step by graph replay, context ``ctx``): AOTX_LEAN=0 (the fused plan
    before this work), 1, 2, 3 and auto, interleaved, twice."""
    from kernels.cuda import driver
    from kernels.cuda.fused_policy import LEAN_AUTO

    timer, st = driver.Timer(), backend.dev.stream
    keep = backend.lean
    out = []
    try:
        for b in batches:
            for lean in (0, 1, 2, 3, LEAN_AUTO) * 2:
                label = "AOTX_LEAN=auto" if lean == LEAN_AUTO else f"AOTX_LEAN={lean}"
                backend.lean = lean
                n_launch, ms = step_launches_ms(backend, step_batch, b, ctx, st, timer)
                out.append((b, label, n_launch, ms))
    finally:
        backend.lean = keep
    return out


def main() -> int:
    from kernels import create_backend
    from ops.gpu.bench import _step_batch, step_breakdown
    from ops.gpu.model_check import random_bundle

    backend = create_backend("cuda", random_bundle(), num_pages=2 * 130 + 16, page_size=16)
    cfg = backend.config
    if not backend.k.lean_ok(cfg.hidden, cfg.ffn, cfg.vocab_size):
        print("lean kernels refused (shapes or occupancy)", flush=True)
        return 1
    for name, val, unit in kernel_rows(backend):
        print(f"kernel {name:<58} {val:8.1f} {unit}", flush=True)
    for b, label, n, us in step_rows(backend, _step_batch):
        print(f"decode step batch {b} {label:<14}: {us:7.1f} us/step, {n} launches", flush=True)
    for b, label, n, us in step_rows(backend, _step_batch, batches=(1, 2), ctx=2048):
        print(f"decode step batch {b} ctx 2048 {label:<14}: {us:7.1f} us/step, {n} launches", flush=True)
    for lean in (0, 1, 2, 3):   # each op class of a batch-1 step alone (ops.gpu.bench.step_breakdown)
        backend.lean = lean
        for name, n, us in step_breakdown(backend, 1):
            print(f"step b=1 AOTX_LEAN={lean} op class {name:<44} x{n:<3} {us:8.1f} us ({us / max(n, 1):.2f} each)",
                  flush=True)
    backend.lean = 0
    return 0


def _default_nsplit(backend, n_tokens: int, max_len: int) -> int:
    keep = backend.lean
    backend.lean = 0
    try:
        return backend._nsplit(n_tokens, max_len)
    finally:
        backend.lean = keep


if __name__ == "__main__":
    raise SystemExit(main())
