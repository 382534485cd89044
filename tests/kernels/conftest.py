"""Fixtures for the kernels tests: one shared model load per process."""
from __future__ import annotations

import os

# One BLAS thread: with 2, OpenBLAS collapses when the machine is busy (FIELD-NOTES).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402

from kernels import create_backend, load_model_cached  # noqa: E402


@pytest.fixture(scope="session")
def bundle():
    return load_model_cached(progress=False)


@pytest.fixture
def backend(bundle):
    """A fresh numpy backend with a small pool (256 pages x 16 slots)."""
    return create_backend("numpy", bundle, num_pages=256, page_size=16)
