"""Reference kernel: SwiGLU activation on a fused gate/up projection."""
from __future__ import annotations

import numpy as np


def swiglu(gate_up: np.ndarray) -> np.ndarray:
    """``gate_up`` float32 [T, 2F] = ``[gate | up]``; returns ``silu(gate) * up`` [T, F].

    ``silu(g) = g / (1 + exp(-g))``, in float32.
    """
    f = gate_up.shape[-1] // 2
    gate = gate_up[..., :f]
    up = gate_up[..., f:]
    with np.errstate(over="ignore"):  # exp(-g) -> inf for g << 0 gives silu = -0.0, as intended
        return gate / (1.0 + np.exp(-gate)) * up
