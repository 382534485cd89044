"""CPU side of a constrained step's sampling in row ranges (kernels/cuda/sample_parts.py; the backend's
``sample_enqueue`` with ``parts``): every range's launch of the sampling kernel reads, for each of its rows,
exactly the arguments the one launch over every row reads for that row (logit row, temperature, top_p, top_k,
seed, step, min_p, adjusted row), writes its ids at the row's own place of ``sample_out``, and reads its own
mask's row map; the ids' copy runs after each range. (The kernel itself runs on the GPU: ops/gpu/groups_check.py.)"""
from __future__ import annotations

import types

import numpy as np

from kernels.cuda import backend as cuda_backend
from kernels.cuda.logits import DeviceLogits
from kernels.logit_adjust import LogitAdjust
from kernels.sampling_rows import SamplingRows
from kernels.token_mask import TokenMask, kernel_args

BASE, OUT = 0x10000, 0x90000


class _Kernels:
    def __init__(self):
        self.calls = []

    def sample(self, *args):
        self.calls.append(args)


class _Mask:
    """DeviceTokenMask's stand-in: each range's row map, as sample_args uploads it."""
    def __init__(self):
        self.maps, self.reserved = [], None

    def reserve(self, rows, nbytes):
        self.reserved = (rows, nbytes)

    def sample_args(self, n, mask):
        self.maps.append(kernel_args(n, mask).tolist())
        return (0xB17, 0x5A0 + len(self.maps), mask.bits.shape[1])


def _backend():
    be = object.__new__(cuda_backend.CudaBackend)
    be.dev = types.SimpleNamespace(make_current=lambda: None)
    be._greedy_gen, be.r_cap, be.sample_buf, be.sample_out = None, 64, BASE, OUT
    be.config = types.SimpleNamespace(vocab_size=100)
    be.generation = 1
    be.k, be.token_mask, be.uploaded = _Kernels(), _Mask(), {}
    be._htod = lambda ptr, arr: be.uploaded.__setitem__(ptr, np.array(arr, copy=True).view(np.uint8))
    be.adjust_bufs = types.SimpleNamespace(enqueue=lambda ptr, base, adjust: 0xAD0)
    return be


def _row_args(be, call, r):
    """What the kernel reads for its row r (the pointers of one sample launch into the uploaded arguments)."""
    raw = be.uploaded[BASE]

    def at(ptr, dtype, k):
        off = ptr - BASE + k * np.dtype(dtype).itemsize
        return raw[off:off + np.dtype(dtype).itemsize].view(dtype)[0].item()
    logits, rows, vocab, temp, top_p, top_k, seed, step, min_p, adj, scratch, out, n = call[:13]
    assert r < n
    return (at(rows, np.int32, r), at(temp, np.float32, r), at(top_p, np.float32, r), at(top_k, np.int32, r),
            at(seed, np.uint64, r), at(step, np.uint64, r), at(min_p, np.float32, r), at(adj, np.int32, r),
            scratch, out + 4 * r)


def test_ranges_read_each_rows_arguments_and_write_its_place():
    n = 7
    rng = np.random.default_rng()
    sampling = SamplingRows(temperature=rng.random(n).astype(np.float32), top_p=rng.random(n).astype(np.float32),
                            top_k=rng.integers(0, 50, n).astype(np.int32),
                            seed=rng.integers(0, 2**63, n).astype(np.uint64), step=np.arange(n, dtype=np.int64) + 3,
                            min_p=rng.random(n).astype(np.float32),
                            adjust=LogitAdjust.build([(1, 0.5, 0.0, {3: (1, 0.0)}, -1),
                                                      (4, 0.0, 0.2, {5: (2, 0.0)}, 2), (6, 0.0, 0.0, {7: (0, 1.0)}, -1)]))
    idx = np.array([6, 5, 4, 3, 2, 1, 0], np.int32)
    whole = _backend()
    logits = DeviceLogits(whole, 0xABC, n, 100, 1, rows=idx)
    whole.sample_enqueue(cuda_backend.MaskedLogits(logits, TokenMask(np.array([0, 2, 5], np.int32),
                                                                       np.zeros((3, 4), np.uint32))), sampling)
    assert len(whole.k.calls) == 1
    parts_be = _backend()
    logits = DeviceLogits(parts_be, 0xABC, n, 100, 1, rows=idx)
    m1 = TokenMask(np.array([0, 2], np.int32), np.zeros((2, 4), np.uint32))
    m2 = TokenMask(np.array([2], np.int32), np.zeros((1, 4), np.uint32))     # (row 5, relative to 3)
    copies = []
    got = parts_be.sample_enqueue(cuda_backend.MaskedLogits(logits, m1), sampling, [(0, 3, m1), (3, 7, m2)],
                                  lambda lo, hi: copies.append((lo, hi, len(parts_be.k.calls))))
    assert got == n and copies == [(0, 3, 1), (3, 7, 2)]
    assert parts_be.token_mask.maps == [[0, -1, 1], [-1, -1, 0, -1]] and parts_be.token_mask.reserved == (4, 32)
    first, second = parts_be.k.calls
    assert first[12] == 3 and second[12] == 4
    for r in range(n):
        call, rr = (first, r) if r < 3 else (second, r - 3)
        assert _row_args(parts_be, call, rr) == _row_args(whole, whole.k.calls[0], r), r
    assert first[13:] == (0xB17, 0x5A1, 4) and second[13:] == (0xB17, 0x5A2, 4)
