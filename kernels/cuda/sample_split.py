"""sample_rows_split's launch shape and switch (kernels/cuda/sampling_split.cuh): a row over a cluster of
SPLIT_C blocks of SPLIT_THREADS threads, its candidates in ``smem(vocab)`` bytes of dynamic shared memory.
No driver here (CPU tests import it: tests/kernels_cuda/test_sampling_split.py)."""
from __future__ import annotations

SPLIT_C = 8                 # the kernel's SPLIT_C: blocks (a cluster) a row; 8 is the portable maximum
SPLIT_THREADS = 512         # the kernel's SPLIT_THREADS (>= 256: a thread a histogram bin)
SMEM_MAX = 96 * 1024        # the compact list's dynamic shared memory at most (vocab <= 65,536)
DEFAULT = "0"               # AOTX_SAMPLE_SPLIT when unset: off until a whole `make gpu-check ARGS=--real` with it on
                            # is green twice on one machine (session 13: one full run had a batching line at 19/22)
ENV = "AOTX_SAMPLE_SPLIT"
# at most this many rows take the split kernel (AOTX_SAMPLE_SPLIT_MAX_ROWS): on the H100 (session 13,
# ops.gpu.sampling_bench) it is 3x sample_rows at 1 row and 1.7-1.9x at 64 rows (t=0.7, masked), at 128
# rows 1.0-1.13x (greedy 0.69x) and at 256 rows 0.84-1.25x (8 blocks a row are many waves of the SMs)
MAX_ROWS = 64
MAX_ROWS_ENV = "AOTX_SAMPLE_SPLIT_MAX_ROWS"


def smem(vocab: int) -> int:
    """A block's slice (ceil(vocab / SPLIT_C) tokens) as a u64 order key and a u32 weight - 1 each."""
    return -(-vocab // SPLIT_C) * 12


def fits(vocab: int) -> bool:
    """The split kernel takes this vocabulary (else sample_rows does)."""
    return smem(vocab) <= SMEM_MAX


def wanted(env) -> bool:
    """AOTX_SAMPLE_SPLIT: 1 (sample_rows_split where the device has clusters) or 0 (sample_rows, a block a
    row); unset or empty: DEFAULT."""
    value = env.get(ENV, DEFAULT) or DEFAULT
    if value not in ("0", "1"):
        raise ValueError(f"{ENV} must be 0 or 1, got {value!r}")
    return value == "1"


def max_rows(env) -> int:
    """AOTX_SAMPLE_SPLIT_MAX_ROWS (an int >= 0), else MAX_ROWS: the largest step the split kernel samples."""
    value = env.get(MAX_ROWS_ENV, "")
    if not value:
        return MAX_ROWS
    if not value.isdigit():
        raise ValueError(f"{MAX_ROWS_ENV} must be a whole number, got {value!r}")
    return int(value)
