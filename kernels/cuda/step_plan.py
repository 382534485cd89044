"""A step's launches in order: the (op name, launch) pairs CudaBackend.plan gives for t tokens and r logits rows
(kernels.cuda.backend records them, replays them in graphs, and the benches time them op class by op class).

Per layer: the lean T <= 8 kernels where their plan applies (kernels.cuda.lean_plan), else the fused small-step
kernels (gemv, attn_o_fused, mlp_fused) or the GEMM path (linear_mma / linear_wgmma, flash_prefill or the paged
attention, or decode_attention by decode_plan) with the RMSNorms folded into the projections where norm_fusion applies; then the LM head.
"""
from __future__ import annotations

from kernels.cuda import decode_plan, launchers as L, lean_plan, norm_fusion
from kernels.cuda.launchers import epi


def step_plan(be, t: int, r: int, p: dict[str, int], bt_stride: int, nsplit: int) -> list[tuple[str, object]]:
    """The step on backend ``be`` (kernels.cuda.backend.CudaBackend) as (op name, launch) pairs in order: t
    tokens, r logits rows, staged arrays p."""
    cfg, k = be.config, be.k
    H, F, eps = cfg.hidden, cfg.ffn, cfg.rms_eps
    gemv, fold = t <= L.GEMV_MAX_T, norm_fusion.applies(be, t)   # fold: the norms in the GEMMs (norm_fusion)
    ops = [("embedding", lambda: k.embedding(p["tokens"], be.embed, be.residual, t, H))]
    norm = lambda wn: ("rmsnorm", lambda: k.add_rmsnorm(0, be.residual, wn, be.h, 0, t, H, eps))  # noqa: E731
    for li, w in enumerate(be.layers):
        if gemv and be.fused and (mode := lean_plan.mode_for(be.lean, t)):   # lean.cu (lean_plan)
            ops += lean_plan.layer_ops(be, mode, li, t, p, bt_stride, nsplit)
            continue
        kc, vc = be.k_cache + li * be.layer_kv_bytes, be.v_cache + li * be.layer_kv_bytes
        e_qkv, e_gu, e_add, e_down = norm_fusion.layer_epilogues(be, li, p, kc, vc, fold)
        if gemv:
            ops.append(("norm+qkv+rope+kv_write", lambda w=w, e=e_qkv: k.gemv(
                be.residual, 1, 0, w["attn_norm"], eps, w["wqkv"], be.qkv_n, H, t, e)))
        else:
            ops += [] if fold and li else [norm(w["attn_norm"])]
            ops.append(("qkv+rope+kv_write", lambda w=w, e=e_qkv: k.mma(be.h, t, w["wqkv"], be.qkv_n, H, e)))
        if gemv and be.fused and t >= be.fused_attn_min_t:
            ops.append(("attention+o+residual", lambda w=w, kc=kc, vc=vc: k.attn_o_fused(
                be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], bt_stride, be.page_size,
                be.scale, t, cfg.n_kv_heads, nsplit, be.attn, be.part_o, be.part_ml, w["wo"],
                be.residual, H, be.sync + 76, be.sync + 72)))
        else:
            if "tiles" in p:   # a prefill chunk: flash_prefill (kernels.cuda.flash_plan)
                ops.append(("attention (flash)", lambda kc=kc, vc=vc: k.flash_attention(
                    be.q, kc, vc, p["tiles"], p["n_tiles"], p["bq"], p["ks"], p["tok_seq"], p["positions"],
                    p["ctx"], p["bt"], bt_stride, be.page_size, be.scale, cfg.n_kv_heads, be.attn)))
            elif decode_plan.applies(getattr(be, "decode_mma", None), t):   # decode_attention.cu (decode_plan)
                ops.append(("attention (mma)", lambda kc=kc, vc=vc: k.decode_attention(
                    be.decode_mma, be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], bt_stride,
                    be.page_size, be.scale, t, cfg.n_kv_heads, cfg.n_heads, cfg.head_dim, nsplit, be.attn,
                    be.part_o, be.part_ml)))
            else:
                ops.append(("attention", lambda kc=kc, vc=vc: k.attention(
                    be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], bt_stride, be.page_size,
                    be.scale, t, cfg.n_kv_heads, cfg.n_heads, cfg.head_dim, nsplit, be.attn, be.part_o,
                    be.part_ml)))
            ops.append(("o+residual", lambda w=w, e=e_add: k.linear(be.attn, t, w["wo"], H, cfg.q_size, e)))
        if gemv and be.fused:
            ops.append(("norm+gate_up+swiglu+down+residual", lambda w=w: k.mlp_fused(
                be.residual, w["ffn_norm"], eps, w["wgu"], w["wdown"], be.act, H, F, t, be.sync)))
            continue
        if gemv:
            ops.append(("norm+gate_up+swiglu", lambda w=w, e=e_gu: k.gemv(
                be.residual, 1, 0, w["ffn_norm"], eps, w["wgu"], 2 * F, H, t, e)))
        else:
            ops += [] if fold else [norm(w["ffn_norm"])]
            ops.append(("gate_up+swiglu", lambda w=w, e=e_gu: k.mma(be.h, t, w["wgu"], 2 * F, H, e)))
        ops.append(("down+residual", lambda w=w, e=e_down: k.linear(be.act, t, w["wdown"], H, F, e)))
    e_out = epi(L.EPI_STORE, out_f32=be.logits, ld=cfg.vocab_size)
    if r == 0:
        return ops
    if r <= L.GEMV_MAX_T and be.fused:  # the greedy ids land in sample_out (see sample_enqueue)
        ops.append(("norm+lm_head+argmax", lambda: k.lm_head_argmax(
            be.residual, p["rows"], be.out_norm, eps, be.embed, cfg.vocab_size, H, r, be.logits,
            be.sync + 8, be.sync + 4, be.sample_out)))
    elif r <= L.GEMV_MAX_T:
        ops.append(("norm+lm_head", lambda: k.gemv(be.residual, 1, p["rows"], be.out_norm, eps, be.embed,
                                                   cfg.vocab_size, H, r, e_out)))
    else:
        ops.append(("rmsnorm", lambda: k.add_rmsnorm(0, be.residual, be.out_norm, be.hf, p["rows"], r, H, eps)))
        ops.append(("lm_head", lambda: k.mma(be.hf, r, be.embed, cfg.vocab_size, H, e_out)))
    return ops
