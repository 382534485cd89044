"""Tests of the CUDA backend's host side run over a stand-in for kernels.cuda.driver (no GPU here).

A stand-in in sys.modules alone is not enough: once any test of the process imported the real driver
(tests/kernels_cuda/test_cpu_side.py does), `from kernels.cuda import driver` finds the package's
attribute first and gets the real module (which fails with no NVIDIA driver), so whether a host test
passed depended on which tests ran before it in its worker. Both are replaced, and both come back."""
from __future__ import annotations

import sys

import kernels.cuda


def use_standin_driver(monkeypatch, standin, fresh: tuple[str, ...] = ()) -> None:
    """`standin` is kernels.cuda.driver for the test; the modules named in `fresh` are imported afresh
    over it (they are removed from sys.modules now; monkeypatch puts the old ones back)."""
    monkeypatch.setitem(sys.modules, "kernels.cuda.driver", standin)
    monkeypatch.setattr(kernels.cuda, "driver", standin, raising=False)
    for name in fresh:
        monkeypatch.delitem(sys.modules, name, raising=False)
