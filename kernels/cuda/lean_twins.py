"""numpy twins of kernels/cuda/lean.cu (AOTX_LEAN=1): what each launch computes, in float32.

``qkv_lean_twin``: RMSNorm -> [q | k | v] projection -> interleaved RoPE on q and k -> q returned,
k and v written (bf16-rounded) into the caches at the rows' slots (negative slots skipped): the
linear_gemv EPI_QKV launch it replaces. The lean attention + ``o_lean`` pair computes
``kernels.cuda.fused_twins.attn_o_fused_twin``; ``split_partials`` / ``combine_partials`` are the
split algebra between them (one (o, m, l) per split of LEAN_CHUNK-key chunks, merged with the weights
exp(m_s - m) and divided by sum(l_s exp(m_s - m)), as attention_combine and o_lean do).
"""
from __future__ import annotations

import numpy as np

from kernels.cuda.twins import round_bf16
from kernels.ops_norm import rmsnorm
from kernels.ops_rope import apply_rope


def qkv_lean_twin(residual: np.ndarray, norm_w: np.ndarray, eps: float, w_qkv: np.ndarray, positions: np.ndarray,
                  cos: np.ndarray, sin: np.ndarray, slots: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                  head_dim: int) -> np.ndarray:
    """q float32 [T, q_size]; k_cache / v_cache float32 [slots, kv_size] updated in place."""
    kv = k_cache.shape[1]
    q_size = w_qkv.shape[0] - 2 * kv
    y = rmsnorm(np.asarray(residual, np.float32), norm_w, eps) @ np.asarray(w_qkv, np.float32).T
    t = y.shape[0]
    pos = np.asarray(positions)
    q = apply_rope(y[:, :q_size].reshape(t, -1, head_dim), cos[pos], sin[pos]).reshape(t, q_size)
    k = apply_rope(y[:, q_size:q_size + kv].reshape(t, -1, head_dim), cos[pos], sin[pos]).reshape(t, kv)
    keep = np.asarray(slots) >= 0
    k_cache[np.asarray(slots)[keep]] = round_bf16(k[keep])
    v_cache[np.asarray(slots)[keep]] = round_bf16(y[keep, q_size + kv:])
    return q


def split_partials(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, chunk: int,
                   nsplit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One head's keys k, v [L, D] cut as attention_unit cuts them: chunks of ``chunk`` keys, each split a
    contiguous run of ceil(chunks / nsplit) chunks. (o [nsplit, D] unnormalised, m [nsplit], l [nsplit]);
    an empty split has m = -inf, l = 0, o = 0."""
    n = k.shape[0]
    chunks = -(-n // chunk)
    per = -(-chunks // nsplit)
    o = np.zeros((nsplit, q.shape[0]), np.float32)
    m = np.full(nsplit, -np.inf, np.float32)
    l = np.zeros(nsplit, np.float32)
    for s in range(nsplit):
        lo, hi = s * per * chunk, min(n, (s + 1) * per * chunk)
        if lo >= hi:
            continue
        sc = (k[lo:hi] @ q) * np.float32(scale)
        m[s] = sc.max()
        p = np.exp(sc - m[s])
        l[s], o[s] = p.sum(), p @ v[lo:hi]
    return o, m, l


def combine_partials(o: np.ndarray, m: np.ndarray, l: np.ndarray) -> np.ndarray:
    """o_lean's prologue for one head: sum_s o_s w_s / sum_s l_s w_s, w_s = exp(m_s - max m); 0 if empty."""
    top = m.max()
    if top == -np.inf:
        return np.zeros(o.shape[1], np.float32)
    w = np.where(m == -np.inf, 0.0, np.exp(m - top)).astype(np.float32)
    den = float((l * w).sum())
    return (w @ o) / den if den > 0 else np.zeros(o.shape[1], np.float32)
