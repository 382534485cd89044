"""The server's stage stamps (aotx.runtime.input_trace, AOTX_INPUT_TRACE) on a benchmark's own time line:
read the trace file, join it with the client's stamps, and take each stage's median time from the
request (a benchmark helper, not a test)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def read_trace(path: Path) -> dict[str, dict[str, float]]:
    """The server's stage stamps by key (an input's `<lineage hex>/<sequence>`, a response id): the first
    of each stage."""
    out: dict[str, dict[str, float]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            out.setdefault(row["input"], {}).setdefault(row["stage"], row["t"])
    return out


def stage_medians(client: dict[str, dict[str, float]], trace: dict[str, dict[str, float]],
                  stages: tuple[str, ...], q: float = 50.0) -> dict[str, float]:
    """Per stage, the median (or the `q`th percentile) time (ms) from each request's `t0` (client stamps,
    perf_counter: on Linux the server's time.monotonic clock) to that stage, over the requests that have it."""
    per_stage: dict[str, list[float]] = {}
    for key, client_stamps in client.items():
        stamps = {**trace.get(key, {}), **client_stamps}
        for stage in stages:
            if stage in stamps:
                per_stage.setdefault(stage, []).append((stamps[stage] - stamps["t0"]) * 1e3)
    return {stage: float(np.percentile(v, q)) for stage, v in per_stage.items()}


def table(title: str, stages: tuple[str, ...], rows: list[tuple[int, dict[str, float]]]) -> str:
    lines = [f"\n{title}\n", "| concurrent | " + " | ".join(stages) + " |", "|---:|" + "---:|" * len(stages)]
    lines += [f"| {n} | " + " | ".join(f"{m[s]:.1f}" if s in m else "–" for s in stages) + " |" for n, m in rows]
    return "\n".join(lines)
