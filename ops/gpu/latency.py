"""One summary of a streaming load: aggregate tok/s and latency percentiles from arrival stamps."""
from __future__ import annotations

import os

import numpy as np

# The benches' --ignore-eos (vLLM's switch, as its benchmarks use it): every stream runs to max_tokens, so the
# decode batch stays as wide as the kernel bench's. An environment variable, so the spawned client processes
# of ops.gpu.serve_load see it too.
IGNORE_EOS = "AOTX_BENCH_IGNORE_EOS"


def ignore_eos() -> bool:
    return os.environ.get(IGNORE_EOS) == "1"


def set_ignore_eos(on: bool) -> None:
    if on:
        os.environ[IGNORE_EOS] = "1"


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def summarize(stamps: list[list[float]], t0: float, wall: float, tokens: int) -> dict:
    """`stamps[i]`: perf_counter times of request i's output arrivals; `t0`: when all were sent."""
    diffs = [np.diff(s) for s in stamps if len(s) > 1]
    itl = np.concatenate(diffs) * 1e3 if diffs else np.empty(0)
    ttft = np.array([s[0] - t0 for s in stamps if s]) * 1e3
    return {"requests": len(stamps), "tokens": tokens, "wall_s": wall, "tok_s": tokens / wall,
            "itl_p50_ms": _pct(itl, 50), "itl_p99_ms": _pct(itl, 99),
            "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99)}


def device_share(before: dict, after: dict) -> dict:
    """Device-busy share and mean decode width between two engine stats documents (/v1/stats
    "engine", or EngineStats as a dict): busy / (busy + gaps while work waited)."""
    busy = after["device_busy_seconds"] - before["device_busy_seconds"]
    idle = after["device_idle_seconds"] - before["device_idle_seconds"]
    rows = after["decode_rows_total"] - before["decode_rows_total"]
    steps = after["decode_steps_total"] - before["decode_steps_total"]
    return {"device_busy_share": busy / (busy + idle) if busy + idle > 0 else float("nan"),
            "device_busy_s": busy, "mean_decode_batch": rows / steps if steps else float("nan"),
            "max_decode_batch": after.get("max_batch_width", 0)}
