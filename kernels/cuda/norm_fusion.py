"""The RMSNorms of a layer folded into its projections (``AOTX_FUSED_NORM=1``; off by default until make
gpu-check passes on a GPU).

A step of at least ``wgmma_plan.MIN_T`` tokens on linear_wgmma launches, per layer, rmsnorm -> qkv -> attention
-> o (+residual) -> rmsnorm -> gate/up -> down (+residual): two of its seven kernels are RMSNorms (60 of a
1,024-token prefill's 212 launches, ~2.6 us each on an H100 even in a graph, ~10 us of host each when
launched eagerly). Folded: the residual-adding GEMM before a norm (o, and the previous layer's down) also
writes ``h = bf16(r * w)`` (the norm's weight w, the updated residual r) and each row's sums of squares of r
by 64 columns (``ss``, deterministic: no atomics); the GEMM after it (gate/up, qkv) scales its output rows
by ``rstd = 1 / sqrt(mean(r^2) + eps)`` from those sums: ``rmsnorm(r) @ W^T = rstd * ((r * w) @ W^T)``.
(Numerically: bf16 rounding of r * w instead of r * w * rstd, the same relative size.) Layer 0's first norm
and the final norm (on the LM-head rows) stay kernels. The epilogue fields: epilogue.cuh ``struct Epi``.
"""
from __future__ import annotations

from collections.abc import Mapping

DEFAULT = "0"


def fused_norm_enabled(env: Mapping[str, str]) -> bool:
    value = env.get("AOTX_FUSED_NORM", DEFAULT) or DEFAULT
    if value not in ("0", "1"):
        raise ValueError(f"AOTX_FUSED_NORM must be 0 or 1, got {value!r}")
    return value == "1"


def applies(backend, t: int) -> bool:
    """Whether a step of t tokens folds its norms: switched on, every projection on linear_wgmma (t >= its
    MIN_T), hidden a multiple of 64."""
    from kernels.cuda import wgmma_plan   # (MIN_T = 64: past the gemv path's T <= 8)

    return (backend.fused_norm and t >= wgmma_plan.MIN_T and backend.k.wgmma is not None
            and backend.config.hidden % 64 == 0)


def layer_epilogues(backend, li: int, p, kc: int, vc: int, fold: bool) -> tuple:
    """Layer li's epilogues (launchers.Epi) of qkv, gate/up, o and down; with ``fold`` (``applies``) o and down
    (but the last layer's) write the next norm's h and sums, gate/up and qkv (but layer 0's) read them."""
    from kernels.cuda import launchers as L

    b, cfg = backend, backend.config
    H, layers = cfg.hidden, backend.layers
    nxt = layers[li + 1]["attn_norm"] if fold and li + 1 < len(layers) else 0
    e_qkv = L.epi(L.EPI_QKV, out_f32=b.q, positions=p["positions"], rope=b.rope, slots=p["slots"], k_cache=kc,
                  v_cache=vc, head_dim=cfg.head_dim, q_size=cfg.q_size, kv_size=cfg.kv_size,
                  **(consumer(b) if fold and li else {}))
    e_gu = L.epi(L.EPI_SWIGLU, out_bf16=b.act, ld=cfg.ffn, **(consumer(b) if fold else {}))
    e_add = L.epi(L.EPI_ADD, out_f32=b.residual, ld=H, **(producer(b, layers[li]["ffn_norm"]) if fold else {}))
    e_down = L.epi(L.EPI_ADD, out_f32=b.residual, ld=H, **(producer(b, nxt) if nxt else {}))
    return e_qkv, e_gu, e_add, e_down


def producer(backend, norm_w: int) -> dict:
    """launchers.epi keywords of a residual-adding GEMM that also writes h = bf16(r * norm_w) and the sums."""
    cfg = backend.config
    return {"norm_w": norm_w, "norm_out": backend.h, "ss_out": backend.ss, "ss_groups": cfg.hidden // 64,
            "eps": cfg.rms_eps}


def consumer(backend) -> dict:
    """launchers.epi keywords of a GEMM whose A is that h: its rows scaled by rstd."""
    cfg = backend.config
    return {"ss_in": backend.ss, "ss_groups": cfg.hidden // 64, "eps": cfg.rms_eps}
