"""CPU side of a constrained step's sampling in row ranges (kernels/cuda/sample_parts.py; the backend's
``sample_enqueue`` with ``parts``, through kernels.cuda.sample_args.launch_ranges): every range's launch of the
sampling kernel reads, for each of its rows, exactly the arguments the one launch over every row reads for that
row (logit row, temperature, top_p, top_k, seed, step, min_p, adjusted row), writes its id at the row's own place
of ``sample_out``, and reads its own mask's row map; the ids' copy runs after each range. (The kernel itself runs
on the GPU: ops/gpu/groups_check.py.)"""
from __future__ import annotations

import numpy as np

from kernels.cuda.sample_args import launch_ranges, sample_args
from kernels.logit_adjust import LogitAdjust
from kernels.sampling_rows import SamplingRows
from kernels.token_mask import TokenMask, kernel_args

BASE, OUT, LOGITS, SCRATCH = 0x10000, 0x90000, 0xABC, 0xAD0


class _Kernels:
    def __init__(self):
        self.calls = []

    def sample(self, *args):
        self.calls.append(args)


def _row_args(raw: np.ndarray, call, r):
    """What the kernel reads for its row r through one launch's pointers into the packed arguments."""
    def at(ptr, dtype, k):
        size = np.dtype(dtype).itemsize
        off = ptr - BASE + k * size
        return raw[off:off + size].view(dtype)[0].item()
    logits, rows, vocab, temp, top_p, top_k, seed, step, min_p, adj, scratch, out, n = call[:13]
    assert 0 <= r < n
    return (logits, vocab, at(rows, np.int32, r), at(temp, np.float32, r), at(top_p, np.float32, r),
            at(top_k, np.int32, r), at(seed, np.uint64, r), at(step, np.uint64, r), at(min_p, np.float32, r),
            at(adj, np.int32, r), scratch, out + 4 * r)


def _mask_args(maps):
    def args(n, mask):
        maps.append(kernel_args(n, mask).tolist())
        return (0xB17, 0x5A0 + len(maps), mask.bits.shape[1])
    return args


def test_ranges_read_each_rows_arguments_and_write_its_place():
    n = 7
    rng = np.random.default_rng()
    sampling = SamplingRows(temperature=rng.random(n).astype(np.float32), top_p=rng.random(n).astype(np.float32),
                            top_k=rng.integers(0, 50, n).astype(np.int32),
                            seed=rng.integers(0, 2**63, n).astype(np.uint64), step=np.arange(n, dtype=np.int64) + 3,
                            min_p=rng.random(n).astype(np.float32),
                            adjust=LogitAdjust.build([(1, 0.5, 0.0, {3: (1, 0.0)}, -1), (4, 0.0, 0.2, {5: (2, 0.0)}, 2),
                                                      (6, 0.0, 0.0, {7: (0, 1.0)}, -1)]))
    pad8, packed = sample_args(np.array([6, 5, 4, 3, 2, 1, 0], np.int32), sampling)
    raw = packed.view(np.uint8)
    whole, whole_maps = _Kernels(), []
    launch_ranges(whole, LOGITS, BASE, pad8, n, 100, SCRATCH, OUT,
                  [(0, n, TokenMask(np.array([0, 2, 5], np.int32), np.zeros((3, 4), np.uint32)))],
                  _mask_args(whole_maps))
    assert len(whole.calls) == 1 and whole_maps == [[0, -1, 1, -1, -1, 2, -1]]
    k, maps, copies = _Kernels(), [], []
    m1 = TokenMask(np.array([0, 2], np.int32), np.zeros((2, 4), np.uint32))
    m2 = TokenMask(np.array([2], np.int32), np.zeros((1, 4), np.uint32))     # (row 5: relative to row 3)
    launch_ranges(k, LOGITS, BASE, pad8, n, 100, SCRATCH, OUT, [(0, 3, m1), (3, 7, m2)], _mask_args(maps),
                  lambda lo, hi: copies.append((lo, hi, len(k.calls))))
    assert copies == [(0, 3, 1), (3, 7, 2)] and maps == [[0, -1, 1], [-1, -1, 0, -1]]
    first, second = k.calls
    assert first[12] == 3 and second[12] == 4
    assert first[13:] == (0xB17, 0x5A1, 4) and second[13:] == (0xB17, 0x5A2, 4)
    for r in range(n):
        call, rr = (first, r) if r < 3 else (second, r - 3)
        assert _row_args(raw, call, rr) == _row_args(raw, whole.calls[0], r), r


def test_one_range_without_a_mask_is_todays_launch():
    k = _Kernels()
    launch_ranges(k, LOGITS, BASE, 4, 3, 100, 0, OUT, [(0, 3, None)], None)
    assert k.calls == [(LOGITS, BASE, 100, BASE + 16, BASE + 32, BASE + 48, BASE + 96, BASE + 96 + 24, BASE + 64,
                        BASE + 80, 0, OUT, 3, 0, 0, 0)]
