"""When a step's attention runs on flash_prefill (kernels/cuda/flash_attention.cu), and its query tiles.

* ``AOTX_FLASH_PREFILL=1``: a step uses flash_prefill when some sequence brings at least
  ``FLASH_MIN_QUERIES`` query tokens (a prefill chunk); decode steps and small mixed steps keep
  paged_attention (split-K over the context, CUDA graphs). ``0``: never (every step uses
  paged_attention, attention.cu). ON BY DEFAULT since ``make gpu-check ARGS=--real`` passed on an H100
  (2026-12-07: every flash_check line, the real-weights prefill/decode and France -> Paris with it;
  TTFT of a 1,024-token prompt 7.08 -> 3.79 ms, docs/PERFORMANCE.md "GPU call set of session 9").
  Unset means ``DEFAULT``.
* A tile is up to ``bq`` consecutive query tokens of one sequence: ``[first token, rows]``. Tiles are
  listed heaviest first (most keys to visit: the limit of the tile's last row), so the long causal rows
  start early and the short ones fill in behind them.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

DEFAULT = "1"
FLASH_MIN_QUERIES = 16
# (query tokens per tile, key groups per block): flash_prefill, flash_prefill_k2, flash_prefill_64
VARIANTS = ((16, 1), (16, 2), (64, 1))
MAX_TILES = 65535      # gridDim.y


def flash_enabled(env: Mapping[str, str]) -> bool:
    value = env.get("AOTX_FLASH_PREFILL", DEFAULT) or DEFAULT
    if value not in ("0", "1"):
        raise ValueError(f"AOTX_FLASH_PREFILL must be 0 or 1, got {value!r}")
    return value == "1"


def wants_flash(query_start: np.ndarray, min_queries: int = FLASH_MIN_QUERIES) -> bool:
    qs = np.asarray(query_start)
    return len(qs) > 1 and int(np.diff(qs).max()) >= min_queries


def variant(query_start: np.ndarray, n_kv: int, sm_count: int) -> tuple[int, int]:
    """(tile rows, key groups). 64-token tiles (one K/V load for 4x the rows) once they alone give every
    SM two blocks; else 16-token tiles, with two key groups a block (each walks half of a tile's keys)
    while the 16-token tiles give at most two blocks an SM (a single 1,024-token prompt: 192 blocks)."""
    n = np.diff(np.asarray(query_start, dtype=np.int64))
    if int((-(-n // 64)).sum()) * n_kv >= 2 * sm_count:
        return 64, 1
    return (16, 2) if int((-(-n // 16)).sum()) * n_kv <= 2 * sm_count else (16, 1)


def tiles(query_start: np.ndarray, positions: np.ndarray, context_lens: np.ndarray, bq: int) -> np.ndarray:
    """int32 [n_tiles, 2]: (first token, rows) per tile, heaviest first (stable among equals)."""
    qs = np.asarray(query_start, dtype=np.int64)
    n = np.diff(qs)
    per = -(-n // bq)                                   # tiles per sequence (0 for an empty one)
    seq = np.repeat(np.arange(len(n)), per)
    k = np.arange(len(seq)) - np.repeat(np.cumsum(per) - per, per)   # tile index within its sequence
    first = qs[seq] + k * bq
    rows = np.minimum(bq, qs[seq + 1] - first)
    out = np.stack([first, rows], axis=1).astype(np.int32)
    if len(out) == 0:
        return out
    last = np.asarray(positions, dtype=np.int64)[first + rows - 1]
    work = np.minimum(last + 1, np.asarray(context_lens, dtype=np.int64)[seq])
    return np.ascontiguousarray(out[np.argsort(-work, kind="stable")])
