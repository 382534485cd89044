"""Which device-to-device copies feed a step's placeholder tokens (no driver import: CPU-tested)."""
from __future__ import annotations

import numpy as np


def runs(t_idx: np.ndarray, rows: np.ndarray) -> list[tuple[int, int, int]]:
    """(first token, first row, length) of each run where both token and row go up by one."""
    out: list[tuple[int, int, int]] = []
    for t, r in zip(t_idx.tolist(), rows.tolist()):
        if out and out[-1][0] + out[-1][2] == t and out[-1][1] + out[-1][2] == r:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + 1)
        else:
            out.append((t, r, 1))
    return out
