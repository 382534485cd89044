"""The per-row arguments of the sampling kernel (sample_rows in sampling.cu), packed for one upload."""
from __future__ import annotations

import numpy as np

from kernels.sampling_rows import SamplingRows


def sample_args(idx: np.ndarray, rows: SamplingRows) -> tuple[int, np.ndarray]:
    """(pad8, uint32 buffer) for `n = len(idx)` rows: logit row index, temperature, top_p, top_k, min_p and
    the adjusted-row index (-1: none) as int32/float32 sections of `pad8` words each (padded to 8 bytes),
    then seed and step as uint64 [n] each. The kernel's pointers are the sections' offsets."""
    n = len(idx)
    pad8 = -(-n // 2) * 2
    host = np.zeros(pad8 * 6 + n * 4, dtype=np.uint32)
    host[0:n] = idx.astype(np.uint32)
    host[pad8:pad8 + n] = np.asarray(rows.temperature, dtype=np.float32).view(np.uint32)
    host[2 * pad8:2 * pad8 + n] = np.asarray(rows.top_p, dtype=np.float32).view(np.uint32)
    host[3 * pad8:3 * pad8 + n] = np.asarray(rows.top_k, dtype=np.int32).view(np.uint32)
    host[4 * pad8:4 * pad8 + n] = rows.min_p_array().view(np.uint32)
    adj_row = np.full(n, -1, dtype=np.int32)
    if rows.adjust is not None and len(rows.adjust.rows):
        adj_row[rows.adjust.rows] = np.arange(len(rows.adjust.rows), dtype=np.int32)
    host[5 * pad8:5 * pad8 + n] = adj_row.view(np.uint32)
    host[6 * pad8:6 * pad8 + 2 * n] = np.asarray(rows.seed, dtype=np.uint64).view(np.uint32)
    host[6 * pad8 + 2 * n:6 * pad8 + 4 * n] = np.asarray(rows.step, dtype=np.int64).astype(np.uint64).view(np.uint32)
    return pad8, host
