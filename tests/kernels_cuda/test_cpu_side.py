"""CPU-only checks of the CUDA backend's host side: the GPU probe never loads the driver, backend
choice, bf16 packing and the SwiGLU interleave twin."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from kernels.backend import BackendUnavailable, create_backend, resolve_backend_name
from kernels.cuda import probe
from kernels.cuda.twins import from_bf16, interleave_gate_up, round_bf16, to_bf16
from kernels.ops_mlp import swiglu


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv(probe.ENV, "0")
    probe.gpu_present.cache_clear()
    yield
    probe.gpu_present.cache_clear()


def test_auto_picks_numpy_without_gpu_and_never_loads_the_driver(no_gpu):
    assert resolve_backend_name("auto") == "numpy"
    assert "kernels.cuda.driver" not in sys.modules


def test_cuda_without_gpu_is_unavailable_before_any_driver_call(no_gpu):
    with pytest.raises(BackendUnavailable, match="no NVIDIA GPU"):
        create_backend("cuda", bundle=None, num_pages=4)
    assert "kernels.cuda.driver" not in sys.modules


def test_forced_probe(monkeypatch):
    monkeypatch.setenv(probe.ENV, "1")
    probe.gpu_present.cache_clear()
    try:
        assert resolve_backend_name("auto") == "cuda"
    finally:
        probe.gpu_present.cache_clear()


def test_bf16_round_trip_nearest_even():
    x = np.array([1.0, -2.5, 3.14159, 1e-30, 65504.0, 1.00390625, 1.01171875], dtype=np.float32)
    b = to_bf16(x)
    assert b.dtype == np.uint16
    assert from_bf16(b)[0] == 1.0 and from_bf16(b)[1] == -2.5
    assert from_bf16(to_bf16(np.float32([1.00390625])))[0] == 1.0        # tie -> even
    assert from_bf16(to_bf16(np.float32([1.01171875])))[0] == 1.015625   # tie -> even (up)
    assert np.all(np.abs(round_bf16(x) - x) <= np.abs(x) * 2 ** -8)


def test_interleaved_gate_up_pairs_give_swiglu():
    rng = np.random.default_rng(0)
    f, k = 6, 4
    w = rng.standard_normal((2 * f, k)).astype(np.float32)
    h = rng.standard_normal((3, k)).astype(np.float32)
    y = h @ interleave_gate_up(w).T
    pairs = y[:, 0::2] / (1 + np.exp(-y[:, 0::2])) * y[:, 1::2]
    np.testing.assert_allclose(pairs, swiglu(h @ w.T), rtol=1e-6)


def test_cuda_sched_names_the_allowed_values_before_any_driver_call(monkeypatch):
    from kernels.cuda import driver
    monkeypatch.setenv("AOTX_CUDA_SCHED", "busy")
    with pytest.raises(ValueError, match="auto, spin, yield, blocking"):
        driver.Device()
