"""kernels/cuda/step_graphs.py on the CPU (the driver's Graph replaced by a recorder): which eager step is
launched eagerly, captured or replayed, what its key holds, eviction and clearing. (That a replayed prefill
equals the eager one is ops/gpu/step_graphs_check.py's, on a GPU.)"""
from __future__ import annotations

import types

import pytest

from kernels.cuda import step_graphs as S


class _Graph:
    made: list = []

    def __init__(self, stream, record):
        self.launches, self.destroyed = 0, False
        record()                       # a capture runs the launches once, into the graph
        _Graph.made.append(self)

    def launch(self, stream):
        assert not self.destroyed
        self.launches += 1

    def destroy(self):
        self.destroyed = True


def _backend():
    b = types.SimpleNamespace(recorded=[], syncs=0, fused=True, fused_attn_min_t=2, flash=True)
    b.k = types.SimpleNamespace(wgmma=types.SimpleNamespace(tma=True), flash_stages=2)
    b.dev = types.SimpleNamespace(stream=0)

    def sync():
        b.syncs += 1
    b.dev.synchronize = sync
    b._record = lambda t, r, p, width, nsplit: b.recorded.append((t, r, dict(p), width, nsplit))
    return b


@pytest.fixture(autouse=True)
def _graphs():
    _Graph.made = []


P = {"tokens": 1000, "positions": 5096, "tiles": 9000, "n_tiles": 64, "bq": 16, "ks": 2}


def test_eager_then_capture_then_replay():
    b = _backend()
    g = S.StepGraphs(b, graph=_Graph)
    g.run(1024, 1, P, 64, 1)
    assert len(b.recorded) == 1 and not _Graph.made and g.eager == 1          # first sight: eager
    g.run(1024, 1, dict(P), 64, 1)
    assert len(b.recorded) == 2 and len(_Graph.made) == 1 and _Graph.made[0].launches == 1 and g.captures == 1
    for _ in range(3):
        g.run(1024, 1, dict(P), 64, 1)
    assert len(b.recorded) == 2 and _Graph.made[0].launches == 4 and g.replays == 3   # replays record nothing


def test_the_key_tells_every_launch_apart():
    b = _backend()
    g = S.StepGraphs(b, graph=_Graph)
    base = g.key(1024, 1, P, 64, 1)
    assert g.key(1024, 1, dict(reversed(list(P.items()))), 64, 1) == base     # order of p does not matter
    others = [g.key(1023, 1, P, 64, 1), g.key(1024, 2, P, 64, 1), g.key(1024, 1, {**P, "tiles": 9004}, 64, 1),
              g.key(1024, 1, {**P, "n_tiles": 63}, 64, 1), g.key(1024, 1, {**P, "ks": 1}, 64, 1),
              g.key(1024, 1, P, 128, 1), g.key(1024, 1, P, 64, 2)]
    b.flash = False
    others.append(g.key(1024, 1, P, 64, 1))
    b.flash, b.k.wgmma.tma = True, False
    others.append(g.key(1024, 1, P, 64, 1))
    b.k.flash_stages = 3
    others.append(g.key(1024, 1, P, 64, 1))
    b.k.wgmma = None
    others.append(g.key(1024, 1, P, 64, 1))
    assert len(set(others)) == len(others) and base not in others


def test_capacity_evicts_the_least_recently_used_after_the_stream_drains():
    b = _backend()
    g = S.StepGraphs(b, capacity=2, graph=_Graph)
    for t in (100, 200, 100, 300):          # 100 and 200 captured on their second sight: t=300 twice below
        g.run(t, 1, P, 8, 1)
        g.run(t, 1, P, 8, 1)
    assert g.captures == 3 and len(g.graphs) == 2 and b.syncs == 1
    assert _Graph.made[1].destroyed and not _Graph.made[0].destroyed    # 200 was the least recently used
    g.clear()
    assert all(x.destroyed for x in _Graph.made) and not g.graphs and not g.seen


def test_disabled_is_always_eager_and_the_switch():
    b = _backend()
    g = S.StepGraphs(b, enabled=False, graph=_Graph)
    for _ in range(4):
        g.run(1024, 1, P, 64, 1)
    assert len(b.recorded) == 4 and not _Graph.made and g.eager == 4
    assert S.step_graphs_enabled({}) and S.DEFAULT == "1"
    assert not hasattr(S, "driver")          # importable without the driver (test_cpu_side asserts it)
    assert not S.step_graphs_enabled({"AOTX_STEP_GRAPHS": "0"}) and S.step_graphs_enabled({"AOTX_STEP_GRAPHS": ""})
    with pytest.raises(ValueError, match="AOTX_STEP_GRAPHS"):
        S.step_graphs_enabled({"AOTX_STEP_GRAPHS": "yes"})
