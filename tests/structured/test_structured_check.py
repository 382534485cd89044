"""The gpu-check of structured outputs (ops/gpu/structured_check.py), its own logic run on numpy."""
from __future__ import annotations

from ops.gpu import structured_check


def test_structured_gpu_check_passes_on_numpy(model_bundle):
    got = []
    structured_check.run(model_bundle, lambda *r: got.append(r), backend="numpy")
    assert len(got) == 4     # valid, unchanged neighbours, mask worker, matcher processes
    for name, value, thr, *extra in got:
        assert value >= thr, (name, value, extra)
