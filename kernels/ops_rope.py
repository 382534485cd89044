"""Reference kernel: interleaved (adjacent-pair) rotary position embedding.

For a head vector ``x`` of size ``D`` at position ``p`` and pair index
``i in [0, D/2)``: ``theta_i = p * base ** (-2 i / D)`` (computed in float64,
then cos/sin rounded to float32), and the pair ``(x[2i], x[2i+1])`` becomes
``(x[2i] cos - x[2i+1] sin,  x[2i] sin + x[2i+1] cos)``.

This is the GGUF convention (llama.cpp permutes Q/K rows at conversion);
HF's ``rotate_half`` pairs ``(x[i], x[i + D/2])`` on un-permuted weights instead.
"""
from __future__ import annotations

import numpy as np


def rope_cos_sin(positions: np.ndarray, head_dim: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin float32 [T, head_dim/2] for the given absolute positions [T]."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate adjacent pairs of ``x`` float32 [T, n_heads, D] with cos/sin [T, D/2]; returns a new array."""
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    c = cos[:, None, :]
    s = sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def rope(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """``apply_rope`` with cos/sin computed for ``positions`` [T]."""
    cos, sin = rope_cos_sin(positions, x.shape[-1], base)
    return apply_rope(x, cos, sin)
