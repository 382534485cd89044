"""Reference kernels: RMSNorm and fused residual-add + RMSNorm (all float32)."""
from __future__ import annotations

import numpy as np


def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``y = x / sqrt(mean(x**2, axis=-1) + eps) * weight``, computed in float32.

    x float32 [..., H], weight float32 [H]. The mean is over the last axis.
    """
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x * (1.0 / np.sqrt(ms + eps)) * weight


def add_rmsnorm(x: np.ndarray, residual: np.ndarray, weight: np.ndarray,
                eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Fused residual add + RMSNorm: ``r = x + residual``; returns ``(r, rmsnorm(r, weight, eps))``."""
    r = x + residual
    return r, rmsnorm(r, weight, eps)
