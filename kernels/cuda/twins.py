"""Host-side bf16 packing and the weight layout the fused kernels expect.

The kernels' numpy twins are the reference ops in kernels/ops_*.py (and kernels/sampler.py); the
checks in ops/gpu/kernel_check.py compose them for the fused epilogues. bf16 on the host is a uint16
array holding the top half of a float32 (round to nearest even), exactly what the device stores.
"""
from __future__ import annotations

import numpy as np


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
