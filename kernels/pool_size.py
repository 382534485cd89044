"""How big the KV pool and the batch are when nobody says: from the device's free memory on the GPU.

The CUDA backend's pool defaults to ``gpu_memory_utilization`` (0.5) of the device memory free when
the backend is created (before its weights are loaded), like vLLM's ``--gpu-memory-utilization``;
the other half covers the weights (~0.3 GB bf16), activations, CUDA graphs and a second process
(a benchmark or check beside a server). On an H200 (~139 GB free) that is ~190k pages of 16 tokens,
~3M tokens: 256 streams each reserving a whole 8k context take 69% of it, so the engine's
conservative per-request reservations (prompt + max_tokens) are harmless there. The numpy
backend keeps 2,048 pages (host memory is mapped lazily; CPU batches are small).
"""
from __future__ import annotations

NUMPY_PAGES = 2048
NUMPY_MAX_BATCH = 64
DEFAULT_GPU_MEMORY_UTILIZATION = 0.5


def kv_page_bytes(n_layers: int, kv_size: int, page_size: int, itemsize: int = 2) -> int:
    """Bytes of one page of K and V over every layer (bf16 on the GPU)."""
    return 2 * n_layers * page_size * kv_size * itemsize


def pages_for_memory(free_bytes: int, fraction: float, n_layers: int, kv_size: int, page_size: int) -> int:
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {fraction}")
    return max(1, int(free_bytes * fraction) // kv_page_bytes(n_layers, kv_size, page_size))


def default_max_batch(num_pages: int, page_size: int, tokens_per_request: int, largest_bucket: int | None) -> int:
    """The batch a pool holds when every request reserves ``tokens_per_request``, at most the largest
    CUDA-graph bucket (None: the numpy backend's fixed 64)."""
    if largest_bucket is None:
        return NUMPY_MAX_BATCH
    per = max(1, -(-tokens_per_request // page_size))
    return max(1, min(largest_bucket, num_pages // per))
