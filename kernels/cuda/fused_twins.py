"""numpy twins of kernels/cuda/fused.cu and attn_fused.cu (the T <= 8 decode kernels): what each launch computes, in float32.

``mlp_fused_twin`` is the two-kernel path composed (RMSNorm -> interleaved gate/up -> SwiGLU rounded to
bf16 -> down -> residual add); ``lm_head_argmax_twin`` is RMSNorm -> LM head -> the greedy rule of
kernels/sampler.py (argmax, the lowest id on ties; NaN never wins). Weights are float32 arrays holding
bf16-representable values ([N, K], the device layout; gate/up interleaved as kernels.cuda.twins).
"""
from __future__ import annotations

import numpy as np

from kernels.cuda.twins import round_bf16
from kernels.ops_attention import paged_attention
from kernels.ops_norm import rmsnorm


def mlp_fused_twin(residual: np.ndarray, norm_w: np.ndarray, eps: float, w_gate_up_il: np.ndarray,
                   w_down: np.ndarray) -> np.ndarray:
    """The new residual [T, H]: ``residual + bf16(silu(g) * u) @ w_down.T`` with (g, u) the
    interleaved rows (2j, 2j+1) of ``w_gate_up_il @ rmsnorm(residual)``."""
    h = rmsnorm(np.asarray(residual, np.float32), norm_w, eps)
    y = h @ np.asarray(w_gate_up_il, np.float32).T
    g, u = y[:, 0::2], y[:, 1::2]
    with np.errstate(over="ignore"):
        act = round_bf16(g / (1.0 + np.exp(-g)) * u)
    return residual + act @ np.asarray(w_down, np.float32).T


def greedy_ids(logits: np.ndarray) -> np.ndarray:
    """argmax per row, the lowest id on ties, NaN ignored (an all-NaN row gives 0)."""
    lg = np.where(np.isnan(logits), -np.inf, logits)
    ids = np.argmax(lg, axis=-1).astype(np.int32)
    ids[np.all(np.isnan(logits), axis=-1)] = 0
    return ids


def lm_head_argmax_twin(residual: np.ndarray, rows: np.ndarray, norm_w: np.ndarray, eps: float,
                        w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logits [T, V], greedy ids [T]) of the residual rows ``rows``."""
    h = rmsnorm(np.asarray(residual, np.float32)[np.asarray(rows)], norm_w, eps)
    logits = h @ np.asarray(w, np.float32).T
    return logits, greedy_ids(logits)


def attn_o_fused_twin(residual: np.ndarray, q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                      positions: np.ndarray, query_start: np.ndarray, context_lens: np.ndarray,
                      block_tables: np.ndarray, page_size: int, scale: float, w_o: np.ndarray) -> np.ndarray:
    """attn_o_fused (kernels/cuda/attn_fused.cu): the new residual ``residual + bf16(attn) @ w_o.T``
    with attn the paged attention of q [T, n_heads, D] (kernels.ops_attention), rounded to bf16 as the
    attention kernel stores it."""
    attn = paged_attention(np.asarray(q, np.float32), k_cache, v_cache, positions, query_start, context_lens,
                           block_tables, page_size, scale)
    t = attn.shape[0]
    return residual + round_bf16(attn.reshape(t, -1)) @ np.asarray(w_o, np.float32).T
