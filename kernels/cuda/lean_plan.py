"""The lean plan of a T <= 8 step's layers (AOTX_LEAN=1, kernels.cuda.fused_policy): which lean.cu /
lean_mlp.cu kernels a layer launches and how many attention splits they use.

AOTX_LEAN=1, per layer: qkv_lean (RMSNorm + QKV + RoPE + K/V write), the lean paged attention (LEAN_CHUNK-key
chunks, partials only), o_lean (split combine + O + residual add) and mlp_lean (lean_mlp.cu: mlp_fused
for exactly T rows): four launches where the default plan has five (linear_gemv, paged_attention,
attention_combine, linear_gemv, mlp_fused) or, from T = 4, three (linear_gemv, attn_o_fused, mlp_fused).
AOTX_LEAN=2: three launches: qkv_lean, paged_attention_merged (the splits merged by each group's last
split) and omlp_lean (O + residual, a grid barrier, then mlp_lean's work).
AOTX_LEAN=3 (T <= 4; larger steps as =2): two launches: the merged attention and omlpq_lean (omlp_lean's
work, a third grid barrier, then the NEXT layer's norm + QKV + RoPE + K/V write); layer 0's qkv_lean
runs alone and the last layer ends with omlp_lean.
"""
from __future__ import annotations

from collections.abc import Mapping

from kernels.cuda.fused_policy import LEAN_AUTO, LEAN_AUTO_MODES, lean_mode, lean_prefetch

LEAN_CHUNK = 64          # lean.cu: keys per attention chunk (its LEAN_CHUNK default)
LEAN_MAX_SPLITS = 8      # o_lean's partials a thread (LEAN_MAX_SPLITS in lean.cu)
LEAN_TM = (1, 2, 4, 8)   # lean.cu / lean_mlp.cu: one kernel per row bound
OMLPQ_MAX_T = 4          # omlpq_lean's row bounds end here (AOTX_LEAN=3 runs larger steps as =2)


def lean_tm(t: int) -> int:
    """The lean kernel that runs t rows: the smallest row bound LEAN_TM >= t."""
    return next(tm for tm in LEAN_TM if tm >= t)


def _pow2ceil(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def configure(be, env: Mapping[str, str]) -> None:
    """``be.lean``: the AOTX_LEAN setting where the fused plan runs and the lean kernels take the model's
    shapes (else 0); ``be.k.lean_prefetch`` from AOTX_LEAN_PREFETCH."""
    cfg = be.config
    be.lean = lean_mode(env) if be.fused and be.k.lean_ok(cfg.hidden, cfg.ffn, cfg.vocab_size) else 0
    be.k.lean_prefetch = lean_prefetch(env)


def mode_for(setting: int, t: int) -> int:
    """The lean plan a step of t tokens runs under the AOTX_LEAN setting (kernels.cuda.fused_policy):
    0 (none) above 8 tokens; the auto table by row bound."""
    if t > LEAN_TM[-1] or not setting:
        return 0
    return LEAN_AUTO_MODES[lean_tm(t)] if setting == LEAN_AUTO else setting


def lean_nsplit(n_tokens: int, max_len: int, n_kv: int, sm_count: int) -> int:
    """Splits along the context: enough blocks to fill the GPU twice over, at most one per chunk of
    LEAN_CHUNK keys and LEAN_MAX_SPLITS (o_lean holds that many partials a thread)."""
    chunks = -(-max_len // LEAN_CHUNK)
    want = -(-2 * sm_count // (n_tokens * n_kv))
    return max(1, min(_pow2ceil(want), _pow2ceil(chunks), LEAN_MAX_SPLITS))


def layer_ops(be, mode: int, li: int, t: int, p: dict[str, int], bt_stride: int, nsplit: int) -> list:
    """(op name, launch) pairs of layer ``li`` on backend ``be`` (kernels.cuda.backend) under lean plan
    ``mode`` (mode_for)."""
    cfg, k, w = be.config, be.k, be.layers[li]
    kc, vc = be.k_cache + li * be.layer_kv_bytes, be.v_cache + li * be.layer_kv_bytes
    qkv = ("norm+qkv+rope+kv_write (lean)", lambda: k.qkv_lean(
        be.residual, w["attn_norm"], cfg.rms_eps, w["wqkv"], be.qkv_n, cfg.hidden, t, p["positions"], be.rope,
        p["slots"], be.q, kc, vc, cfg.head_dim, cfg.q_size, cfg.kv_size))
    if mode == 3 and t <= OMLPQ_MAX_T:   # this layer's qkv ran in the previous layer's omlpq (but layer 0's)
        ops = [qkv] if li == 0 else []
        ops.append(("attention+combine (lean, merged)", lambda: k.lean_attention_merged(
            be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], bt_stride, be.page_size, be.scale, t,
            cfg.n_kv_heads, nsplit, be.attn, be.part_o, be.part_ml, be.sync + 76)))
        if li + 1 == len(be.layers):
            ops.append(("o+residual+norm+gate_up+swiglu+down+residual (lean)", lambda: k.omlp_lean(
                be.residual, w["ffn_norm"], cfg.rms_eps, w["wgu"], w["wdown"], be.act, cfg.hidden, cfg.ffn, t,
                be.sync, be.attn, w["wo"], cfg.q_size)))
            return ops
        from kernels.cuda.launchers import QkvNext   # (launchers imports this module)

        wn = be.layers[li + 1]
        nxt = QkvNext(wn["wqkv"], wn["attn_norm"], p["positions"], be.rope, p["slots"], be.q,
                      kc + be.layer_kv_bytes, vc + be.layer_kv_bytes, be.qkv_n, cfg.head_dim, cfg.q_size, cfg.kv_size)
        ops.append(("o+residual+mlp+next norm+qkv+rope+kv_write (lean)", lambda: k.omlpq_lean(
            be.residual, w["ffn_norm"], cfg.rms_eps, w["wgu"], w["wdown"], be.act, cfg.hidden, cfg.ffn, t, be.sync,
            be.attn, w["wo"], cfg.q_size, nxt)))
        return ops
    if mode >= 2:
        return [qkv, ("attention+combine (lean, merged)", lambda: k.lean_attention_merged(
            be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], bt_stride, be.page_size, be.scale, t,
            cfg.n_kv_heads, nsplit, be.attn, be.part_o, be.part_ml, be.sync + 76)),
            ("o+residual+norm+gate_up+swiglu+down+residual (lean)", lambda: k.omlp_lean(
                be.residual, w["ffn_norm"], cfg.rms_eps, w["wgu"], w["wdown"], be.act, cfg.hidden, cfg.ffn, t,
                be.sync, be.attn, w["wo"], cfg.q_size))]
    return [
        qkv,
        ("attention (lean)", lambda: k.lean_attention(
            be.q, kc, vc, p["tok_seq"], p["positions"], p["ctx"], p["bt"], bt_stride, be.page_size, be.scale, t,
            cfg.n_kv_heads, nsplit, be.attn, be.part_o, be.part_ml)),
        ("combine+o+residual (lean)", lambda: k.o_lean(
            be.attn, be.part_o, be.part_ml, nsplit, cfg.n_heads, w["wo"], be.residual, cfg.hidden, t)),
        ("norm+gate_up+swiglu+down+residual (lean)", lambda: k.mlp_lean(
            be.residual, w["ffn_norm"], cfg.rms_eps, w["wgu"], w["wdown"], be.act, cfg.hidden, cfg.ffn, t, be.sync)),
    ]
