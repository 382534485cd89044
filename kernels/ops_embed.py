"""Reference kernels: token embedding gather and the tied LM head."""
from __future__ import annotations

import numpy as np


def embedding(token_ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``out[t, :] = table[token_ids[t], :]``.  token_ids int [T], table float32 [V, H] -> [T, H]."""
    return table[token_ids]


def lm_head(x: np.ndarray, table_t: np.ndarray) -> np.ndarray:
    """Tied LM head: ``logits[r, v] = sum_h x[r, h] * table_t[h, v]``, where ``table_t`` is the
    embedding table transposed, [H, V].  x float32 [R, H] -> float32 [R, V]."""
    return x @ table_t
