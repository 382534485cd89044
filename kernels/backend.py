"""Backends: one object that owns the KV pool and runs forward / sample / logprobs.

Only ``"numpy"`` exists. ``"cuda"`` is reserved for the CUDA backend (a later
issue); asking for it raises ``BackendUnavailable`` without touching the driver.
"""
from __future__ import annotations

import numpy as np

from kernels import sampler
from kernels.gguf_loader import ModelBundle
from kernels.kv_cache import PagedKVCache
from kernels.model import LlamaModel
from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch


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

    def logprobs(self, logits: np.ndarray, chosen: np.ndarray, k: int):
        return sampler.logprobs(logits, chosen, k)


_BACKENDS = {"numpy": NumpyBackend}
_PLANNED = {"cuda": "the CUDA backend is not built yet (it is a later issue); use 'numpy'"}


def available_backends() -> list[str]:
    return sorted(_BACKENDS)


def create_backend(name: str, bundle: ModelBundle, num_pages: int, page_size: int = 16):
    """A backend by name: ``"numpy"``. Raises ``BackendUnavailable`` for anything else."""
    if name in _BACKENDS:
        return _BACKENDS[name](bundle, num_pages=num_pages, page_size=page_size)
    if name in _PLANNED:
        raise BackendUnavailable(f"backend {name!r} unavailable: {_PLANNED[name]}")
    raise BackendUnavailable(f"unknown backend {name!r}; available: {available_backends()}")
