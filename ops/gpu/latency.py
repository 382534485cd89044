"""One summary of a streaming load: aggregate tok/s and latency percentiles from arrival stamps."""
from __future__ import annotations

import numpy as np


def summarize(stamps: list[list[float]], t0: float, wall: float, tokens: int) -> dict:
    """`stamps[i]`: perf_counter times of request i's output arrivals; `t0`: when all were sent."""
    itl = np.concatenate([np.diff(s) for s in stamps if len(s) > 1]) * 1e3
    ttft = np.array([s[0] - t0 for s in stamps if s]) * 1e3
    return {"requests": len(stamps), "tokens": tokens, "wall_s": wall, "tok_s": tokens / wall,
            "itl_p50_ms": float(np.percentile(itl, 50)), "itl_p99_ms": float(np.percentile(itl, 99)),
            "ttft_p50_ms": float(np.percentile(ttft, 50))}
