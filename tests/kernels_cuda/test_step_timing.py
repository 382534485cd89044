"""The overlapped CUDA launcher's per-step breakdown (kernels/cuda/step_timing.py) over a stand-in driver
whose events keep the host clock: a deferred step's wait for its sampling is the time from its forward to
the moment its mask's thread enqueued the sampling, and it is not counted as busy."""
from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from tests.kernels_cuda.test_overlap_mask_host import (
    _Backend,
    _batch,
    _FilledElsewhere,
    overlap_over_standin,
)

NOW = [0.0]          # the stand-in's clock (seconds): events and the launcher's host times read it


def _clock():
    return NOW[0]


class _ClockEvent:
    def __init__(self, timing=False):
        self.t = None

    def record(self, stream):
        self.t = NOW[0]

    def synchronize(self):
        pass

    def since(self, earlier):
        return 1e3 * (self.t - earlier.t)


@pytest.fixture
def overlap(monkeypatch):
    device_ids = {}
    module = overlap_over_standin(monkeypatch, _ClockEvent, device_ids,
                                  ("kernels.cuda.overlap", "kernels.cuda.step_timing"))
    clock = types.SimpleNamespace(perf_counter=_clock)
    monkeypatch.setattr(module, "time", clock)
    monkeypatch.setattr(sys.modules["kernels.cuda.step_timing"], "time", clock)
    yield module, device_ids
    for name in ("kernels.cuda.overlap", "kernels.cuda.step_timing"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_the_breakdown_splits_a_deferred_steps_wait_from_its_forward_and_sampling(overlap):
    module, device_ids = overlap
    be = _Backend(device_ids)
    launcher = module.CudaStepLauncher(be)
    launcher.breakdown(True)
    rows = np.arange(2, dtype=np.int32)
    plain = launcher.launch(_batch(), None, rows, None)
    mask = _FilledElsewhere(be.events)
    NOW[0] += 0.001
    constrained = launcher.launch(_batch(), None, rows, None, mask=mask)
    NOW[0] += 0.002                                         # the mask takes 2 ms to fill
    mask.fill_on_another_thread()
    NOW[0] += 0.0005
    last = launcher.launch(_batch(), None, rows, None)
    for h in (plain, constrained, last):
        h.ids()
    got = launcher.timeline.summary()
    assert got["forward"][3] == 3 and got["sampled_on"] == {threading.current_thread().name: 2, "filler": 1}
    r = launcher.timeline.rows
    assert r["wait"] == pytest.approx([0.0, 2.0, 0.0]) and r["defer"] == pytest.approx([0.0, 2.0, 0.0])
    assert r["period"] == pytest.approx([1.0, 2.5]) and r["gap"] == pytest.approx([1.0, 0.5])
    assert r["forward"] == r["sample"] == pytest.approx([0.0] * 3)   # (the stand-in's device takes no time)
    assert got["busy_share"] == 0.0 and got["wait"][:3] == pytest.approx((2.0 / 3, 0.0, 2.0))
    from ops.bench.structured_probe import breakdown_table
    table = breakdown_table([("json_schema", dict(got, rows_per_step=2.0), {"a": 0.1, "b": 0.2})])
    assert "| json_schema | 3 | 2.0 |" in table and "filler 1" in table
    launcher.reset_timing()
    assert launcher.timeline.summary()["forward"][3] == 0
