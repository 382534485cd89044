"""CPU side of the gated sampling (kernels/cuda/mask_gate.py) over a stand-in driver whose stream is a
thread (ops.bench.structured_host.SimStream) and whose host word it waits on is SimWord: the sampling
is enqueued at the launch and reads the bits only once the mask's thread has written them and opened the
gate; a mask that fails opens its gate anyway and fails its step's ids(); a launcher closed with a mask
nobody filled does not leave the stream waiting."""
from __future__ import annotations

import ctypes
import importlib
import sys
import threading
import types

import numpy as np
import pytest

from kernels.token_mask import TokenMask
from tests.driver_standin import use_standin_driver
from ops.bench.structured_host import HostPinned, SimStream, SimWord, _Event

_MODULES = ("kernels.cuda.overlap", "kernels.cuda.step_timing", "kernels.cuda.mask_gate")
SAMPLE_OUT = 0xD0


@pytest.fixture
def gated(monkeypatch):
    monkeypatch.setenv("AOTX_MASK_GATE", "1")   # the default; set against an outer AOTX_MASK_GATE=0
    memory: dict = {}
    stream = SimStream()
    use_standin_driver(monkeypatch, types.SimpleNamespace(
        Pinned=HostPinned, Event=_Event, htod_pinned=lambda *a: None, dtod=lambda *a: None, HostWord=SimWord,
        dtoh_async=lambda dst, src, n, s: s.put(lambda: ctypes.memmove(dst, memory[src].ctypes.data, n))),
        fresh=_MODULES)
    yield importlib.import_module("kernels.cuda.overlap"), memory, stream
    for name in _MODULES:
        sys.modules.pop(name, None)
    stream.close()


class _Backend:
    """Samples, on the stream, the lowest token each row's mask allows (rows without a mask: 7)."""
    t_cap, r_cap, ints_cap, sample_out, gated_masks = 64, 8, 1024, SAMPLE_OUT, True

    def __init__(self, memory, stream):
        self.memory, self.stream = memory, stream
        self.dev = types.SimpleNamespace(stream=stream, make_current=lambda: None, synchronize=stream.synchronize)

    def forward(self, batch, patch=None):
        return np.zeros((2, 64), np.float32)

    def masked_logits(self, logits, mask):
        return (logits, mask)

    def sample_enqueue(self, logits, sampling):
        logits, mask = logits if isinstance(logits, tuple) else (logits, None)
        if getattr(mask, "gate", None) is not None:
            mask.gate(self.stream)

        def run():
            ids = np.full(2, 7, np.int32)
            if mask is not None:
                for j, r in enumerate(np.asarray(mask.rows).tolist()):
                    bits = np.unpackbits(np.array(mask.bits[j]).view(np.uint8), bitorder="little")
                    allowed = np.flatnonzero(bits)
                    ids[r] = int(allowed[0]) if len(allowed) else -1     # (a gate opened by close: unread)
            self.memory[SAMPLE_OUT] = ids
        self.stream.put(run)
        return 2


class _Mask:
    """aotx.engine.masks.LateMask's interface to the launcher: filled (or failing) when `run()` is called."""
    deferred = True

    def __init__(self, allow: int | None) -> None:
        self.rows, self.words, self.allow = np.array([1], np.int32), 2, allow
        self._out, self._ready, self._done = None, [], threading.Event()

    def into(self, bits):
        self._out = bits

    def when_ready(self, fn):
        self._ready.append(fn)

    def run(self):
        if self.allow is not None:
            self._out[:] = 0
            self._out[0, self.allow // 32] = np.uint32(1 << (self.allow % 32))
        self._done.set()
        for fn in self._ready:
            fn()

    def __call__(self):
        if self.allow is None:
            raise RuntimeError("matcher failed")
        return TokenMask(self.rows, self._out)


def _batch():
    from kernels.step_batch import StepBatch
    z = np.zeros(2, np.int32)
    return StepBatch(token_ids=z, positions=z, query_start=np.array([0, 1, 2], np.int32), context_lens=z + 1,
                     block_tables=np.zeros((2, 1), np.int32), slot_mapping=z, logits_rows=np.arange(2, dtype=np.int32))


def test_the_sampling_waits_for_the_gate_and_reads_the_bits_written_before_it_opened(gated):
    module, memory, stream = gated
    launcher = module.CudaStepLauncher(_Backend(memory, stream))
    assert launcher.gate is not None
    mask = _Mask(allow=37)
    handle = launcher.launch(_batch(), None, np.arange(2, dtype=np.int32), None, mask=mask)
    assert handle.enqueued.is_set() and launcher.gate.issued == 1
    assert not handle.end._done.wait(0.05)          # the stream waits at the gate
    threading.Thread(target=mask.run).start()       # the mask worker
    assert handle.ids().tolist() == [7, 37]
    launcher.close()


def test_a_failing_mask_opens_its_gate_and_fails_its_step_only(gated):
    module, memory, stream = gated
    launcher = module.CudaStepLauncher(_Backend(memory, stream))
    mask = _Mask(allow=None)
    handle = launcher.launch(_batch(), None, np.arange(2, dtype=np.int32), None, mask=mask)
    mask.run()
    with pytest.raises(RuntimeError, match="matcher failed"):
        handle.ids()
    following = _Mask(allow=3)
    nxt = launcher.launch(_batch(), None, np.arange(2, dtype=np.int32), None, mask=following)
    following.run()
    assert nxt.ids().tolist() == [7, 3]
    launcher.close()


def test_closing_with_a_mask_nobody_filled_leaves_no_stream_waiting(gated):
    module, memory, stream = gated
    launcher = module.CudaStepLauncher(_Backend(memory, stream))
    launcher.launch(_batch(), None, np.arange(2, dtype=np.int32), None, mask=_Mask(allow=5))
    closed = threading.Thread(target=launcher.close)
    closed.start()
    closed.join(10)
    assert not closed.is_alive()


def test_gate_off_by_env_the_worker_enqueues_it_as_before(gated, monkeypatch):
    module, memory, stream = gated
    monkeypatch.setenv("AOTX_MASK_GATE", "0")
    launcher = module.CudaStepLauncher(_Backend(memory, stream))
    assert launcher.gate is None
    launcher.close()
