"""Per-row sampling parameters handed to a backend's sampler, one entry per logits row."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernels.logit_adjust import LogitAdjust


@dataclass(frozen=True)
class SamplingRows:
    temperature: np.ndarray  # float32 [R]; 0 means greedy (argmax, lowest id on ties)
    top_p: np.ndarray        # float32 [R]; 1.0 disables nucleus filtering
    top_k: np.ndarray        # int32 [R]; 0 disables top-k filtering
    seed: np.ndarray         # uint64 [R]; the request's seed
    step: np.ndarray         # int64 [R]; index of the output token being drawn (0 for the first)
    min_p: np.ndarray | None = None       # float32 [R]; 0 (or None: every row) disables min-p
    adjust: LogitAdjust | None = None     # penalties and logit_bias of the rows that have any

    def min_p_of(self, r: int) -> float:
        return 0.0 if self.min_p is None else float(self.min_p[r])

    def min_p_array(self) -> np.ndarray:
        n = len(self.temperature)
        return np.zeros(n, np.float32) if self.min_p is None else np.asarray(self.min_p, dtype=np.float32)
