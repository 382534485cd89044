"""sample_rows_split's launch shape and switch (kernels/cuda/sampling_split.cuh): a row over a cluster of
SPLIT_C blocks of SPLIT_THREADS threads, its candidates in ``smem(vocab)`` bytes of dynamic shared memory.
No driver here (CPU tests import it: tests/kernels_cuda/test_sampling_split.py)."""
from __future__ import annotations

SPLIT_C = 8                 # the kernel's SPLIT_C: blocks (a cluster) a row; 8 is the portable maximum
SPLIT_THREADS = 512         # the kernel's SPLIT_THREADS (>= 256: a thread a histogram bin)
SMEM_MAX = 96 * 1024        # the compact list's dynamic shared memory at most (vocab <= 65,536)
DEFAULT = "0"               # AOTX_SAMPLE_SPLIT when unset: off until `make gpu-check` has passed on a GPU
ENV = "AOTX_SAMPLE_SPLIT"


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
