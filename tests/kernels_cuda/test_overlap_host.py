"""CPU side of the overlapped CUDA launcher: the device-to-device copy plan, which launcher the
engine picks, and the gpu-check that compares it with the classic path (its own logic, run here on
the numpy backend with the engine's device-thread launcher)."""
from __future__ import annotations

import numpy as np

from aotx.engine.launch import InlineLauncher, ThreadLauncher, make_launcher
from kernels.cuda.copy_runs import runs
from ops.gpu import overlap_check


def test_runs_coalesce_consecutive_tokens_and_rows():
    assert runs(np.array([0, 1, 2, 5, 6, 9]), np.array([0, 1, 2, 4, 5, 9])) == [(0, 0, 3), (5, 4, 2), (9, 9, 1)]
    assert runs(np.array([0, 1, 2]), np.array([2, 1, 0])) == [(0, 2, 1), (1, 1, 1), (2, 0, 1)]
    assert runs(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == []


class _Native:
    overlaps = True

    def close(self):
        pass


class _Backend:
    def __init__(self, name, default_on=False):
        self.name, self.default_on, self.forced = name, default_on, []

    def step_launcher(self, force=False):
        self.forced.append(force)
        return _Native() if force or self.default_on else None


def test_the_cuda_backend_overlaps_only_when_asked():
    cuda = _Backend("cuda")
    assert isinstance(make_launcher(cuda, None), InlineLauncher)          # default: the classic loop
    assert isinstance(make_launcher(cuda, True), _Native) and cuda.forced == [False, True]
    assert isinstance(make_launcher(_Backend("cuda", default_on=True), None), _Native)   # the CUDA backend's default (AOTX_CUDA_OVERLAP unset)
    assert isinstance(make_launcher(cuda, False), InlineLauncher) and cuda.forced == [False, True]
    numpy_like = type("B", (), {"name": "numpy"})()
    assert isinstance(make_launcher(numpy_like, None), InlineLauncher)      # numpy: the classic loop
    launcher = make_launcher(numpy_like, True)
    assert isinstance(launcher, ThreadLauncher)
    launcher.close()


def test_the_same_batches_gpu_check_passes_on_numpy(model_bundle):
    bundle = model_bundle
    tok = bundle.tokenizer
    prompts = [tok.encode(f"Question {i}: name a colour.") for i in range(5)]
    got = []
    overlap_check.same_batches_check(bundle, prompts, tok.encode("A later prompt joins the batch."),
                                     lambda *r: got.append(r), backend="numpy", launcher_of=ThreadLauncher)
    (name, value, thr, extra), = got
    assert value == 1.0 and thr == 1.0, extra
