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
from ops.bench.structured_host import HostPinned
from tests.driver_standin import use_standin_driver


class _Event:
    def __init__(self, timing=False):
        pass

    def record(self, stream):
        pass

    def synchronize(self):
        pass

    def since(self, earlier):
        return 0.0


def overlap_over_standin(monkeypatch, event, device_ids: dict, modules=("kernels.cuda.overlap",), dtod=None):
    """kernels.cuda.overlap imported afresh over a stand-in driver (the real one is never imported here):
    host memory for pinned buffers, `event` for CUDA events, a read-back copying from `device_ids`
    (device pointer -> array), `dtod` for device copies (none by default). `modules` are imported afresh
    too (and must be removed after the test)."""
    fake = types.SimpleNamespace(
        Pinned=HostPinned, Event=event, htod_pinned=lambda *a: None, dtod=dtod or (lambda *a: None),
        dtoh_async=lambda dst, src, nbytes, stream: ctypes.memmove(dst, device_ids[src].ctypes.data, nbytes))
    use_standin_driver(monkeypatch, fake, fresh=tuple(modules))
    return importlib.import_module("kernels.cuda.overlap")


@pytest.fixture
def overlap(monkeypatch):
    """kernels.cuda.overlap bound to a stand-in driver."""
    device_ids = {}
    yield overlap_over_standin(monkeypatch, _Event, device_ids), device_ids
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


class _Buffer:
    """kernels.cuda.driver.Buffer's stand-in: distinct fake device addresses, nothing allocated."""
    next_ptr = 0x1000

    def __init__(self, nbytes):
        self.ptr, _Buffer.next_ptr = _Buffer.next_ptr, _Buffer.next_ptr + nbytes + 0x1000

    def free(self):
        pass


def _with_standin_driver(monkeypatch):
    """kernels.cuda.token_mask and kernels.cuda.logits imported afresh over a stand-in driver."""
    use_standin_driver(monkeypatch, types.SimpleNamespace(Buffer=_Buffer),
                       fresh=("kernels.cuda.token_mask", "kernels.cuda.logits"))
    return importlib.import_module("kernels.cuda.token_mask"), importlib.import_module("kernels.cuda.logits")


def test_device_token_mask_uploads_what_the_kernel_reads(monkeypatch):
    """kernels/cuda/token_mask.py over a stand-in driver: the uploads and the kernel's arguments,
    replayed through the kernel's numpy twin, give kernels.token_mask.apply_token_mask's values."""
    from kernels.token_mask import apply_token_mask, masked_rows

    module, logits_mod = _with_standin_driver(monkeypatch)
    rng = np.random.default_rng()
    vocab = 100
    host = rng.standard_normal((6, vocab)).astype(np.float32)
    memory, launches = {}, []

    be = types.SimpleNamespace(generation=3, dev=types.SimpleNamespace(synchronize=lambda: None))
    be._htod = lambda ptr, arr: memory.__setitem__(ptr, np.array(arr, copy=True))
    be.k = types.SimpleNamespace(token_mask=lambda *args: launches.append(args))
    sampled = logits_mod.DeviceLogits(be, 0xABC, 6, vocab, 3, rows=np.array([5, 1, 3], np.int32))
    bits = np.zeros((2, 4), np.uint32)
    bits[0, 0], bits[1, 3] = 0b1011, 1 << 3          # row 0: tokens 0, 1, 3; row 2: token 99
    mask = TokenMask(np.array([0, 2], np.int32), bits)
    out = module.DeviceTokenMask(be).masked(sampled, mask)
    (src, rows_ptr, bits_ptr, bit_row_ptr, out_ptr, v, words, n), = launches
    assert (src, v, words, n) == (0xABC, vocab, 4, 3) and out.ptr == out_ptr and out.rows.tolist() == [0, 1, 2]
    ints = memory[rows_ptr]
    assert bit_row_ptr == rows_ptr + 4 * n
    got = masked_rows(host, ints[:n], memory[bits_ptr], ints[n:])
    expect = host[[5, 1, 3]].copy()
    apply_token_mask(expect, mask)
    assert np.array_equal(got, expect)
    monkeypatch.delitem(sys.modules, "kernels.cuda.token_mask", raising=False)
    monkeypatch.delitem(sys.modules, "kernels.cuda.logits", raising=False)


def test_fused_mask_uploads_what_sample_rows_reads(monkeypatch):
    """The fused path (AOTX_FUSED_MASK): `fused` wraps the rows and their mask untouched, and
    `sample_args` uploads the bits and each sampled row's mask row; replayed through the twin
    (masked_rows: sample_rows reads row r's logit v as -inf where its mask row forbids v), they give
    kernels.token_mask.apply_token_mask's values, unconstrained rows unchanged."""
    from kernels.token_mask import apply_token_mask, masked_rows

    module, logits_mod = _with_standin_driver(monkeypatch)
    vocab = 100
    host = np.random.default_rng().standard_normal((6, vocab)).astype(np.float32)
    memory = {}
    be = types.SimpleNamespace(generation=3, dev=types.SimpleNamespace(synchronize=lambda: None))
    be._htod = lambda ptr, arr: memory.__setitem__(ptr, np.array(arr, copy=True))
    sampled = logits_mod.DeviceLogits(be, 0xABC, 6, vocab, 3, rows=np.array([5, 1, 3], np.int32))
    bits = np.zeros((2, 4), np.uint32)
    bits[0, 0], bits[1, 3] = 0b1011, 1 << 3
    mask = TokenMask(np.array([0, 2], np.int32), bits)
    dm = module.DeviceTokenMask(be)
    wrapped = dm.fused(sampled, mask)
    assert wrapped.logits is sampled and wrapped.mask is mask and wrapped.shape == (3, vocab)
    bits_ptr, row_ptr, words = dm.sample_args(3, wrapped.mask)
    assert words == 4 and memory[row_ptr].tolist() == [0, -1, 1]
    got = masked_rows(host, sampled.rows, memory[bits_ptr], memory[row_ptr])
    expect = host[[5, 1, 3]].copy()
    apply_token_mask(expect, mask)
    assert np.array_equal(got, expect)
    monkeypatch.delitem(sys.modules, "kernels.cuda.token_mask", raising=False)
    monkeypatch.delitem(sys.modules, "kernels.cuda.logits", raising=False)


class _WorkerMask:
    """A mask the mask worker computes (`deferred`): the launcher must not wait for it in launch."""
    deferred = True

    def __init__(self, events, fail=False):
        self.events, self.fail = events, fail

    def __call__(self):
        self.events.append("mask taken")
        if self.fail:
            raise RuntimeError("matcher failed")
        return TokenMask(np.array([1], np.int32), np.zeros((1, 2), np.uint32))


def test_a_mask_on_the_worker_is_sampled_at_the_next_launch_before_its_forward(overlap):
    module, device_ids = overlap
    be = _Backend(device_ids)
    launcher = module.CudaStepLauncher(be)
    rows = np.arange(2, dtype=np.int32)
    launcher.launch(_batch(), None, rows, None)
    second = launcher.launch(_batch(), None, rows, None, mask=_WorkerMask(be.events))
    assert be.events == ["forward", "sample", "forward"]        # launch returned: no mask, no sampling yet
    third = launcher.launch(_batch(), np.array([0, 1], np.int32), rows, None)    # fed by second's ids
    assert be.events[3:] == ["mask taken", ("masked", [1]), "sample", "forward", "sample"]
    assert second.ids().tolist() == [20, 21] and third.ids().tolist() == [30, 31]
    fourth = launcher.launch(_batch(), None, rows, None, mask=_WorkerMask(be.events))
    assert be.events[-1] == "forward"
    assert fourth.ids().tolist() == [40, 41]                   # read before a next launch: sampled then
    assert be.events[-3:] == ["mask taken", ("masked", [1]), "sample"]


def test_a_worker_mask_that_fails_fails_its_step_and_the_steps_it_feeds(overlap):
    module, device_ids = overlap
    be = _Backend(device_ids)
    launcher = module.CudaStepLauncher(be)
    rows = np.arange(2, dtype=np.int32)
    bad = launcher.launch(_batch(), None, rows, None, mask=_WorkerMask(be.events, fail=True))
    with pytest.raises(RuntimeError, match="sampled this step's input tokens failed"):
        launcher.launch(_batch(), np.array([0, -1], np.int32), rows, None)
    with pytest.raises(RuntimeError, match="matcher failed"):
        bad.ids()
    ok = launcher.launch(_batch(), None, rows, None)            # not fed by it: runs
    assert ok.ids().tolist() == [10, 11]


def test_a_ready_worker_mask_is_sampled_as_soon_as_the_engine_looks(overlap):
    """flush(wait=False) (the engine calls it between its chores): a deferred sampling whose mask is
    ready is enqueued now, so the GPU samples while the host builds the next step; one not ready is
    left for the next launch."""
    module, device_ids = overlap
    be = _Backend(device_ids)
    launcher = module.CudaStepLauncher(be)
    rows = np.arange(2, dtype=np.int32)
    mask = _WorkerMask(be.events)
    mask.ready = lambda: False
    first = launcher.launch(_batch(), None, rows, None, mask=mask)
    launcher.flush(wait=False)
    assert be.events == ["forward"]
    mask.ready = lambda: True
    launcher.flush(wait=False)
    assert be.events == ["forward", "mask taken", ("masked", [1]), "sample"]
    launcher.launch(_batch(), None, rows, None)
    assert be.events[4:] == ["forward", "sample"] and first.ids().tolist() == [10, 11]


class _FilledElsewhere(_WorkerMask):
    """A worker mask that tells whoever asked (when_ready) once another thread has filled it."""

    def __init__(self, events):
        super().__init__(events)
        self.callbacks, self.filled = [], False

    def ready(self):
        return self.filled

    def when_ready(self, fn):
        self.callbacks.append(fn)

    def fill_on_another_thread(self):
        import threading

        def fill():
            self.filled = True
            for fn in self.callbacks:
                fn()
        t = threading.Thread(target=fill, name="filler")
        t.start()
        t.join()


def test_a_worker_mask_is_sampled_by_the_thread_that_fills_it_as_soon_as_it_is_filled(overlap):
    """The GPU samples a constrained step once its mask exists, not once the engine thread next looks
    (after delivering the step before and building the next one): the filling thread enqueues it,
    under the launcher's lock, and the next launch does not sample it twice."""
    import threading

    module, device_ids = overlap
    be = _Backend(device_ids)
    threads = []
    real = be.sample_enqueue

    def sample_enqueue(logits, sampling):
        threads.append(threading.current_thread().name)
        return real(logits, sampling)

    be.sample_enqueue = sample_enqueue
    launcher = module.CudaStepLauncher(be)
    rows = np.arange(2, dtype=np.int32)
    mask = _FilledElsewhere(be.events)
    first = launcher.launch(_batch(), None, rows, None, mask=mask)
    assert be.events == ["forward"] and len(mask.callbacks) == 1
    mask.fill_on_another_thread()
    assert be.events == ["forward", "mask taken", ("masked", [1]), "sample"] and threads == ["filler"]
    second = launcher.launch(_batch(), np.array([0, 1], np.int32), rows, None)     # fed by first's ids
    assert be.events[4:] == ["forward", "sample"] and threads == ["filler", "MainThread"]
    assert first.ids().tolist() == [10, 11] and second.ids().tolist() == [20, 21]
    late = _FilledElsewhere(be.events)
    third = launcher.launch(_batch(), None, rows, None, mask=late)
    late.filled = True
    launcher.flush(wait=False)              # the engine thread's look between chores: left to the filler
    assert be.events.count("sample") == 2
    late.fill_on_another_thread()
    launcher.launch(_batch(), None, rows, None)          # not sampled twice
    assert be.events.count("sample") == 4 and threads[-2:] == ["filler", "MainThread"]
    assert third.ids().tolist() == [30, 31]


def test_a_worker_mask_that_fails_on_the_filling_thread_fails_its_step_without_a_wait(overlap):
    """The filling thread's enqueue hands the mask's error to the step: its ids() raise it, a launch fed
    by its ids fails at once (nobody waits for a sampling that will never come), one not fed by it runs."""
    module, device_ids = overlap
    be = _Backend(device_ids)
    launcher = module.CudaStepLauncher(be)
    rows = np.arange(2, dtype=np.int32)
    mask = _FilledElsewhere(be.events)
    mask.fail = True
    bad = launcher.launch(_batch(), None, rows, None, mask=mask)
    mask.fill_on_another_thread()
    assert bad.enqueued.is_set() and "sample" not in be.events
    with pytest.raises(RuntimeError, match="sampled this step's input tokens failed"):
        launcher.launch(_batch(), np.array([0, -1], np.int32), rows, None)
    with pytest.raises(RuntimeError, match="matcher failed"):
        bad.ids()
    assert launcher.launch(_batch(), None, rows, None).ids().tolist() == [10, 11]
