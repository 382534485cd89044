"""CPU side of the CUDA launcher with constrained rows, over a stand-in driver: a late mask is called
after the step's forward is enqueued and before its sampling, it can read the previous launch's ids
there, and what it returns is what the backend masks and samples. (The kernels themselves are checked
on the GPU: ops/gpu/kernel_check.py check_token_mask, ops/gpu/structured_check.py.)"""
from __future__ import annotations

import ctypes
import importlib
import sys
import types

import numpy as np
import pytest

from kernels.token_mask import TokenMask


class _Pinned:
    def __init__(self, nbytes):
        self.nbytes = max(int(nbytes), 64)
        self._raw = (ctypes.c_uint8 * self.nbytes)()
        self.ptr = ctypes.addressof(self._raw)

    def view(self, dtype, n, offset=0):
        return np.frombuffer(self._raw, dtype=np.dtype(dtype), count=n, offset=offset)

    def free(self):
        pass


class _Event:
    def __init__(self, timing=False):
        pass

    def record(self, stream):
        pass

    def synchronize(self):
        pass

    def since(self, earlier):
        return 0.0


@pytest.fixture
def overlap(monkeypatch):
    """kernels.cuda.overlap bound to a stand-in driver (the real one is never imported here)."""
    device_ids = {}
    fake = types.SimpleNamespace(
        Pinned=_Pinned, Event=_Event, htod_pinned=lambda *a: None, dtod=lambda *a: None,
        dtoh_async=lambda dst, src, nbytes, stream: ctypes.memmove(dst, device_ids[src].ctypes.data, nbytes))
    monkeypatch.setitem(sys.modules, "kernels.cuda.driver", fake)
    monkeypatch.delitem(sys.modules, "kernels.cuda.overlap", raising=False)
    module = importlib.import_module("kernels.cuda.overlap")
    yield module, device_ids
    monkeypatch.delitem(sys.modules, "kernels.cuda.overlap", raising=False)


class _Backend:
    t_cap, r_cap, ints_cap, sample_out = 64, 8, 1024, 0xD0

    def __init__(self, device_ids):
        self.events, self.device_ids, self.step = [], device_ids, 0
        self.dev = types.SimpleNamespace(stream=None, make_current=lambda: None, synchronize=lambda: None)

    def forward(self, batch, patch=None):
        self.events.append("forward")
        return np.zeros((2, 40), np.float32)

    def masked_logits(self, logits, mask):
        self.events.append(("masked", mask.rows.tolist()))
        return logits

    def sample_enqueue(self, logits, sampling):
        self.events.append("sample")
        self.step += 1
        self.device_ids[self.sample_out] = np.array([10 * self.step, 10 * self.step + 1], np.int32)
        return 2


def _batch():
    from kernels.step_batch import StepBatch
    z = np.zeros(2, np.int32)
    return StepBatch(token_ids=z, positions=z, query_start=np.array([0, 1, 2], np.int32), context_lens=z + 1,
                     block_tables=np.zeros((2, 1), np.int32), slot_mapping=z, logits_rows=np.arange(2, dtype=np.int32))


def test_late_mask_runs_between_forward_and_sampling_and_reads_the_step_before(overlap):
    module, device_ids = overlap
    be = _Backend(device_ids)
    launcher = module.CudaStepLauncher(be)
    rows = np.arange(2, dtype=np.int32)
    first = launcher.launch(_batch(), None, rows, None)
    seen = []

    def late():
        be.events.append("late mask")
        seen.append(first.ids().tolist())        # the previous launch's ids, read from inside
        return TokenMask(np.array([1], np.int32), np.zeros((1, 2), np.uint32))

    second = launcher.launch(_batch(), None, rows, None, mask=late)
    assert be.events == ["forward", "sample", "forward", "late mask", ("masked", [1]), "sample"]
    assert seen == [[10, 11]] and second.ids().tolist() == [20, 21]
    launcher.launch(_batch(), None, rows, None)          # unconstrained: never masked
    assert be.events[-2:] == ["forward", "sample"]
