"""Per-row sampling parameters handed to a backend's sampler, one entry per logits row."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SamplingRows:
    temperature: np.ndarray  # float32 [R]; 0 means greedy (argmax, lowest id on ties)
    top_p: np.ndarray        # float32 [R]; 1.0 disables nucleus filtering
    top_k: np.ndarray        # int32 [R]; 0 disables top-k filtering
    seed: np.ndarray         # uint64 [R]; the request's seed
    step: np.ndarray         # int64 [R]; index of the output token being drawn (0 for the first)
