"""kernels/cuda/norm_fusion.py on the CPU: the switch, which steps fold their norms, and the epilogue keywords
(that the folded epilogues compute the norm: test_wgmma.py's numpy mirror here, wgmma_check on a GPU)."""
from __future__ import annotations

import types

import pytest

from kernels.cuda import norm_fusion as N


def _backend(**kw):
    cfg = types.SimpleNamespace(hidden=576, rms_eps=1e-5)
    b = types.SimpleNamespace(config=cfg, fused_norm=True, k=types.SimpleNamespace(wgmma=object()), h=4096, ss=8192)
    for key, v in kw.items():
        setattr(b, key, v)
    return b


def test_switch_off_by_default():
    assert N.DEFAULT == "0" and not N.fused_norm_enabled({})
    assert N.fused_norm_enabled({"AOTX_FUSED_NORM": "1"}) and not N.fused_norm_enabled({"AOTX_FUSED_NORM": ""})
    with pytest.raises(ValueError, match="AOTX_FUSED_NORM"):
        N.fused_norm_enabled({"AOTX_FUSED_NORM": "on"})


def test_which_steps_fold():
    b = _backend()
    assert N.applies(b, 64) and N.applies(b, 1024) and not N.applies(b, 63) and not N.applies(b, 8)
    assert not N.applies(_backend(fused_norm=False), 1024)
    assert not N.applies(_backend(k=types.SimpleNamespace(wgmma=None)), 1024)     # linear_mma has no folded norm
    assert not N.applies(_backend(config=types.SimpleNamespace(hidden=600, rms_eps=1e-5)), 1024)


def test_epilogue_keywords():
    b = _backend()
    assert N.producer(b, 777) == {"norm_w": 777, "norm_out": 4096, "ss_out": 8192, "ss_groups": 9, "eps": 1e-5}
    assert N.consumer(b) == {"ss_in": 8192, "ss_groups": 9, "eps": 1e-5}
    assert not hasattr(N, "launchers")      # importable without the driver (test_cpu_side)
