"""numpy twins of what the CUDA kernels compute, built from the reference ops (kernels/ops_*.py).

bf16 on the host is a uint16 array holding the top half of a float32 (round to nearest even),
exactly what the device stores. The fused projection epilogues' twins compose the reference ops.
"""
from __future__ import annotations

import numpy as np

from kernels.ops_attention import kv_write, paged_attention
from kernels.ops_mlp import swiglu
from kernels.ops_norm import rmsnorm
from kernels.ops_rope import apply_rope


def to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint16), round to nearest even; NaN stays NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    rounded = np.where(np.isnan(a), (u >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def from_bf16(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(a: np.ndarray) -> np.ndarray:
    return from_bf16(to_bf16(a))


def interleave_gate_up(w: np.ndarray) -> np.ndarray:
    """[2F, K] = [gate; up] rows -> rows (gate_0, up_0, gate_1, up_1, ...), for the fused SwiGLU epilogue."""
    f = w.shape[0] // 2
    out = np.empty_like(w)
    out[0::2] = w[:f]
    out[1::2] = w[f:]
    return out


def linear_qkv(h, w, cos_sin, positions, slots, k_cache, v_cache, q_size, kv_size, head_dim):
    """Twin of linear_* with EPI_QKV: returns q (roped) and writes roped k and v into the caches."""
    y = h @ w.T
    t = y.shape[0]
    cos, sin = cos_sin
    q = apply_rope(y[:, :q_size].reshape(t, -1, head_dim), cos[positions], sin[positions])
    k = apply_rope(y[:, q_size:q_size + kv_size].reshape(t, -1, head_dim), cos[positions], sin[positions])
    v = y[:, q_size + kv_size:].reshape(t, -1, head_dim)
    kv_write(k_cache, v_cache, k, v, slots)
    return q.reshape(t, q_size)


def linear_swiglu(h, w_gate_up):
    """Twin of EPI_SWIGLU given the un-interleaved [gate; up] weight."""
    return swiglu(h @ w_gate_up.T)


def norm_linear(x, norm_w, eps, w):
    """Twin of linear_gemv with an RMSNorm prologue."""
    return rmsnorm(x, norm_w, eps) @ w.T


__all__ = ["to_bf16", "from_bf16", "round_bf16", "interleave_gate_up", "linear_qkv", "linear_swiglu",
           "norm_linear", "paged_attention"]
