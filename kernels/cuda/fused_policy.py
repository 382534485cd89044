"""Which plan a step of T <= 8 tokens uses, from the environment (read once, when the backend starts).

* ``AOTX_FUSED=0``: the older plan (linear_gemv per projection, attention + combine, separate
  gate/up and down kernels, LM head then sample_rows), for comparison in the same run.
* otherwise the fused plan: mlp_fused per layer and lm_head_argmax, and attn_o_fused (attention +
  combine + O + residual in one launch) for steps of at least ``fused_attn_min_t`` tokens.
  ``AOTX_FUSED_ATTN=1`` uses it at every T, ``AOTX_FUSED_ATTN=0`` never.

* ``AOTX_LEAN`` (default ``auto``: LEAN_AUTO_MODES; ``0`` restores the fused plan above): steps of
  T <= 8 tokens use lean.cu's latency-lean kernels (kernels.cuda.lean_plan). ``AOTX_LEAN=1``: qkv_lean,
  the lean attention (shorter chunks, more splits, no combine launch), o_lean (the combine + O + residual) and mlp_lean (lean_mlp.cu) in place
  of linear_gemv qkv, attention + attention_combine + O (or attn_o_fused) and mlp_fused: 4 launches a
  layer. ``AOTX_LEAN=2``: 3 launches a layer: qkv_lean, the attention with its splits merged by the last
  split of each group (paged_attention_merged) and omlp_lean (O + residual, a grid barrier, the MLP).
  ``AOTX_LEAN=3``: 2 launches a layer at T <= 4: the merged attention and omlpq_lean (omlp_lean's work,
  a grid barrier, the next layer's norm + QKV + RoPE + K/V write).

The default threshold is measured (H200, 2026-12-01, commit f018ef3, ``make gpu-bench``): with
attn_o_fused a decode step took 885.7 / 1000.2 / 1225.2 / 1736.0 us at batch 1 / 2 / 4 / 8, without it
820.1 / 962.7 / 1247.8 / 1874.6 us (its grid barrier costs more than the programmatic-dependent-launch
boundary it replaces while only T * 3 * splits blocks have attention work).
"""
from __future__ import annotations

from collections.abc import Mapping

FUSED_ATTN_MIN_T = 4
NEVER = 1 << 30


def fused_enabled(env: Mapping[str, str]) -> bool:
    return env.get("AOTX_FUSED", "1") != "0"


def fused_attn_min_t(env: Mapping[str, str]) -> int:
    value = env.get("AOTX_FUSED_ATTN")
    if value is None or value == "":
        return FUSED_ATTN_MIN_T
    if value not in ("0", "1"):
        raise ValueError(f"AOTX_FUSED_ATTN must be 0 or 1, got {value!r}")
    return NEVER if value == "0" else 1


LEAN_DEFAULT = "auto"   # (H100 round 1: 76/76 checks; 1.41-1.54x the fused plan at batch 1-8)
LEAN_AUTO = -1
# AOTX_LEAN=auto: the plan per row bound (kernels.cuda.lean_plan.lean_tm), measured on the H100. Round 1
# (2845b23) had =1 ahead at batch 1-2; after the merged attention's two-round-trip merge (round 2, main
# f7b0fc4's parent 80f8154, `python3 -m ops.gpu.lean_bench`, decode step at context 288, µs) =2 wins at
# every row bound: batch 1 / 2 / 4 / 8 = 447 / 540 / 766 / 1,076 against =1's 478 / 602 / 874 / 1,323 and
# =3's 532 / 651 / 855 / 1,077 (docs/PERFORMANCE.md, session 10).
LEAN_AUTO_MODES = {1: 2, 2: 2, 4: 2, 8: 2}


def lean_mode(env: Mapping[str, str]) -> int:
    """0: off; 1: qkv_lean, attention, o_lean, mlp_lean; 2: qkv_lean, the merged attention, omlp_lean;
    3: the merged attention and omlpq_lean (the next layer's qkv inside), T <= 4 (larger T as 2);
    ``auto`` (LEAN_AUTO): LEAN_AUTO_MODES by the step's row bound."""
    value = env.get("AOTX_LEAN", LEAN_DEFAULT) or LEAN_DEFAULT
    if value == "auto":
        return LEAN_AUTO
    if value not in ("0", "1", "2", "3"):
        raise ValueError(f"AOTX_LEAN must be 0, 1, 2, 3 or auto, got {value!r}")
    return int(value)


def lean_prefetch(env: Mapping[str, str]) -> bool:
    """AOTX_LEAN_PREFETCH=0: the lean attention stages no K/V row before griddepcontrol.wait (default 1)."""
    value = env.get("AOTX_LEAN_PREFETCH", "1") or "1"
    if value not in ("0", "1"):
        raise ValueError(f"AOTX_LEAN_PREFETCH must be 0 or 1, got {value!r}")
    return value == "1"
