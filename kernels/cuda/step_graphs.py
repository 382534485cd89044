"""CUDA graphs of the steps the backend launches eagerly (prefill chunks, mixed steps), once a shape repeats.

A 1,024-token prefill is ~212 kernel launches; launched one by one from Python its host time exceeded its GPU
time (docs/PERFORMANCE.md, session 10: TTFT 3.9-4.1 ms against 2.5 ms of kernels). Decode steps are graphs
per batch bucket (backend._decode); a prefill's launches depend on more than its token count, so a graph is
kept per **exact launch key**: the token and logits-row counts, every staged array's device address (the
staging buffer's layout follows the arrays' sizes), the flash tiles' count and variant, the block-table
width, the attention splits, and the switches that change the plan (fused, flash and its pipeline depth,
which linear_wgmma and its load mode, the folded norms). Every value a launch reads from device memory (token ids, positions,
slots, tiles, block tables) is staged before the graph runs, as for the decode graphs, so a graph serves
every step with its key.

Policy: a key's first ``AFTER - 1`` steps launch eagerly (a one-off shape never pays a capture); the next one
is captured (the capture launches nothing itself) and launched, and later ones replay it. At most
``CAPACITY`` graphs are kept (least recently used out). ``AOTX_STEP_GRAPHS=0`` turns it off (every such step
eager, as before); ``StepGraphs.clear()`` drops everything (the backend calls it whenever its buffers move).
"""
from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping

DEFAULT = "1"
AFTER = 2
CAPACITY = 16
MAX_SEEN = 4096


def step_graphs_enabled(env: Mapping[str, str]) -> bool:
    value = env.get("AOTX_STEP_GRAPHS", DEFAULT) or DEFAULT
    if value not in ("0", "1"):
        raise ValueError(f"AOTX_STEP_GRAPHS must be 0 or 1, got {value!r}")
    return value == "1"


class StepGraphs:
    """``run(t, r, p, width, nsplit)`` launches ``backend._record`` of that step: eagerly, or its graph."""

    def __init__(self, backend, enabled: bool = True, after: int = AFTER, capacity: int = CAPACITY, graph=None):
        self.b, self.enabled, self.after, self.capacity = backend, enabled, after, capacity
        self._graph = graph   # driver.Graph (imported on first capture: this module loads without the driver)
        self.graphs: OrderedDict[tuple, object] = OrderedDict()
        self.seen: dict[tuple, int] = {}
        self.replays = self.captures = self.eager = 0   # counts, for the checks and benches

    def key(self, t: int, r: int, p: Mapping[str, int], width: int, nsplit: int) -> tuple:
        b = self.b
        wg = b.k.wgmma
        return (t, r, tuple(sorted(p.items())), width, nsplit, b.fused, b.fused_attn_min_t, b.flash, id(wg),
                getattr(wg, "tma", None), getattr(b.k, "flash_stages", 2), getattr(b, "fused_norm", False),
                getattr(b, "decode_mma", None))

    def run(self, t: int, r: int, p: Mapping[str, int], width: int, nsplit: int) -> None:
        b = self.b
        if not self.enabled:
            self.eager += 1
            b._record(t, r, p, width, nsplit)
            return
        key = self.key(t, r, p, width, nsplit)
        graph = self.graphs.get(key)
        if graph is None:
            n = self.seen.get(key, 0) + 1
            if n < self.after:
                if len(self.seen) >= MAX_SEEN:
                    self.seen.clear()
                self.seen[key] = n
                self.eager += 1
                b._record(t, r, p, width, nsplit)
                return
            self.seen.pop(key, None)
            if self._graph is None:
                from kernels.cuda import driver
                self._graph = driver.Graph
            graph = self._graph(b.dev.stream, lambda: b._record(t, r, p, width, nsplit))
            self.graphs[key] = graph
            self.captures += 1
            if len(self.graphs) > self.capacity:
                self._drop([self.graphs.popitem(last=False)[1] for _ in range(len(self.graphs) - self.capacity)])
        else:
            self.graphs.move_to_end(key)
            self.replays += 1
        graph.launch(b.dev.stream)

    def clear(self) -> None:
        self._drop(list(self.graphs.values()))
        self.graphs.clear()
        self.seen.clear()

    def _drop(self, graphs) -> None:
        """Destroy evicted graphs once the stream has run every launch of them (evictions are rare: a capture
        of a new key beyond CAPACITY, or the backend's buffers moving)."""
        if graphs:
            self.b.dev.synchronize()
            for g in graphs:
                g.destroy()
