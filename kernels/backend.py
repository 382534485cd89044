"""Backends: one object that owns the KV pool and runs forward / sample / logprobs.

``"numpy"`` (the reference), ``"cuda"`` (kernels/cuda: NVRTC kernels, CUDA graphs) and ``"auto"``:
CUDA when ``kernels.cuda.probe.gpu_present()`` says a GPU is here, else numpy. That decision reads
the filesystem only; on a machine without a GPU nothing touches the CUDA driver, and asking for
``"cuda"`` there raises ``BackendUnavailable`` before anything is loaded.
"""
from __future__ import annotations

import numpy as np

from kernels import sampler
from kernels.gguf_loader import ModelBundle
from kernels.kv_cache import PagedKVCache
from kernels.model import LlamaModel
from kernels.pool_size import DEFAULT_GPU_MEMORY_UTILIZATION, NUMPY_PAGES, pages_for_memory
from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch
from kernels.token_mask import TokenMask, apply_token_mask


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be created in this build or on this machine."""


class NumpyBackend:
    name = "numpy"

    def __init__(self, bundle: ModelBundle, num_pages: int, page_size: int = 16):
        self.config = bundle.config
        self.model = LlamaModel(bundle.config, bundle.weights)
        self.kv = PagedKVCache.for_config(bundle.config, num_pages, page_size)

    @property
    def num_pages(self) -> int:
        return self.kv.num_pages

    @property
    def page_size(self) -> int:
        return self.kv.page_size

    def forward(self, batch: StepBatch) -> np.ndarray:
        """float32 [len(batch.logits_rows), vocab]; writes the batch's K/V into the pool."""
        return self.model.forward(batch, self.kv)

    def sample(self, logits: np.ndarray, rows: SamplingRows) -> np.ndarray:
        return sampler.sample(logits, rows)

    def masked_logits(self, logits: np.ndarray, mask: TokenMask) -> np.ndarray:
        """A copy of `logits` with the mask's rows masked (the original stays raw for logprobs)."""
        out = np.array(logits, dtype=np.float32, copy=True)
        apply_token_mask(out, mask)
        return out

    def logprobs(self, logits: np.ndarray, chosen: np.ndarray, k: int):
        return sampler.logprobs(logits, chosen, k)


def _cuda_backend(bundle: ModelBundle, num_pages: int | None, page_size: int = 16,
                  gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION):
    from kernels.cuda.probe import gpu_present

    if not gpu_present():
        raise BackendUnavailable("backend 'cuda' unavailable: no NVIDIA GPU on this machine")
    try:
        from kernels.cuda import driver
        from kernels.cuda.backend import CudaBackend
    except ImportError as exc:
        raise BackendUnavailable(f"backend 'cuda' unavailable: {exc} "
                                 "(install cuda-python 13 and cuda-toolkit[nvrtc,cudart] 13)") from exc
    if num_pages is None:   # a fraction of the memory free now, before the weights are loaded
        driver.Device(0)
        cfg = bundle.config
        num_pages = pages_for_memory(driver.mem_free(), gpu_memory_utilization, cfg.n_layers, cfg.kv_size, page_size)
    return CudaBackend(bundle, num_pages=num_pages, page_size=page_size)


def _numpy_backend(bundle: ModelBundle, num_pages: int | None, page_size: int = 16, gpu_memory_utilization=None):
    return NumpyBackend(bundle, num_pages=NUMPY_PAGES if num_pages is None else num_pages, page_size=page_size)


_BACKENDS = {"numpy": _numpy_backend, "cuda": _cuda_backend}


def resolve_backend_name(name: str) -> str:
    """``"auto"`` -> ``"cuda"`` when a GPU is present (filesystem probe only), else ``"numpy"``."""
    if name == "auto":
        from kernels.cuda.probe import gpu_present

        return "cuda" if gpu_present() else "numpy"
    return name


def available_backends() -> list[str]:
    """Backends that can be created on this machine (``"auto"`` picks among them)."""
    from kernels.cuda.probe import gpu_present

    return sorted(["numpy"] + (["cuda"] if gpu_present() else []))


def create_backend(name: str, bundle: ModelBundle, num_pages: int | None, page_size: int = 16,
                   gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION):
    """A backend by name: ``"numpy"``, ``"cuda"`` or ``"auto"``; ``BackendUnavailable`` otherwise.
    ``num_pages`` None: the default pool (kernels.pool_size: on the GPU a fraction of free memory)."""
    resolved = resolve_backend_name(name)
    if resolved in _BACKENDS:
        return _BACKENDS[resolved](bundle, num_pages=num_pages, page_size=page_size,
                                   gpu_memory_utilization=gpu_memory_utilization)
    raise BackendUnavailable(f"unknown backend {name!r}; available: {available_backends()}")
