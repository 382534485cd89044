"""CI (no GPU): the fused T <= 8 decode kernels (kernels/cuda/fused.cu) compile for sm_90 and sm_90a
with no spills, and their numpy twins agree with the unfused composition and the sampler's greedy rule.
The device checks of the same kernels are in ops/gpu/kernel_check.py (check_fused)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels import sampler
from kernels.cuda import build
from kernels.cuda.fused_twins import (
    attn_o_fused_twin,
    greedy_ids,
    lm_head_argmax_twin,
    mlp_fused_twin,
)
from kernels.cuda.twins import interleave_gate_up, round_bf16
from kernels.ops_attention import paged_attention
from kernels.ops_mlp import swiglu
from kernels.ops_norm import rmsnorm
from kernels.sampling_rows import SamplingRows

MODEL_DEFINES = {"ATT_G": 3, "ATT_D": 64}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(build.ENV_CACHE_DIR, str(tmp_path))
    return tmp_path


# sm_90a here: sm_90 is tests/kernels_cuda/test_compile.py's test_family_compiles_for_sm90[fused] and
# [attn_fused], the same compile_family call with the same defines and a superset of these assertions (the
# same NVRTC compile twice cost ~2.5 s of CPU in the suite).
@pytest.mark.parametrize("arch", ["sm_90a"])
def test_fused_family_compiles(arch, cache):
    cubin = build.compile_family("fused", arch, MODEL_DEFINES)
    assert cubin.data[:4] == b"\x7fELF"
    for name in (b"mlp_fused", b"lm_head_argmax"):
        assert name in cubin.data


@pytest.mark.parametrize("arch", ["sm_90a"])
def test_attn_fused_family_compiles(arch, cache):
    cubin = build.compile_family("attn_fused", arch, MODEL_DEFINES)
    assert cubin.data[:4] == b"\x7fELF" and b"attn_o_fused" in cubin.data


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize(("family", "kernels"), [("fused", ("mlp_fused", "lm_head_argmax")),
                                                 ("attn_fused", ("attn_o_fused",))])
def test_fused_kernels_have_no_stack_frame(arch, family, kernels):
    log = build.ptxas_report(family, arch, MODEL_DEFINES)
    for kernel in kernels:
        assert f"Function properties for {kernel}" in log
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert frames and all(f == ("0", "0", "0") for f in frames), frames


def test_mlp_twin_is_the_two_kernel_composition():
    rng = np.random.default_rng(7)
    t, h, f = 5, 24, 40
    res = rng.standard_normal((t, h)).astype(np.float32)
    nw = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    wgu = round_bf16(rng.standard_normal((2 * f, h)).astype(np.float32) / 5)
    wd = round_bf16(rng.standard_normal((h, f)).astype(np.float32) / 6)
    x = rmsnorm(res, nw, 1e-5)
    ref = res + round_bf16(swiglu(x @ wgu.T)) @ wd.T
    got = mlp_fused_twin(res, nw, 1e-5, interleave_gate_up(wgu), wd)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_greedy_ids_lowest_id_on_ties_as_the_sampler():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((4, 1000)).astype(np.float32)
    logits[0, [17, 400, 999]] = 9.0          # a three-way tie at the top: 17 wins
    logits[1, [5, 6]] = np.float32(0.0)
    logits[1, 6] = -np.float32(0.0)          # -0 and +0 tie
    logits[1] = np.minimum(logits[1], 0.0)
    logits[2, 3] = np.nan                    # NaN never wins
    rows = SamplingRows(np.zeros(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.int32),
                        np.zeros(3, np.uint64), np.zeros(3, np.int64))
    ids = greedy_ids(logits)
    assert ids[0] == 17
    assert ids[1] == int(np.flatnonzero(logits[1] == logits[1].max())[0])
    assert ids[2] == int(np.nanargmax(logits[2]))
    np.testing.assert_array_equal(ids[[0, 1, 3]], sampler.sample(logits[[0, 1, 3]], rows))
    assert greedy_ids(np.full((1, 8), np.nan, np.float32)).tolist() == [0]


def test_lm_head_twin_gathers_rows():
    rng = np.random.default_rng(11)
    res = rng.standard_normal((6, 16)).astype(np.float32)
    nw = np.ones(16, np.float32)
    w = round_bf16(rng.standard_normal((50, 16)).astype(np.float32))
    logits, ids = lm_head_argmax_twin(res, np.array([4, 1]), nw, 1e-5, w)
    np.testing.assert_allclose(logits, rmsnorm(res[[4, 1]], nw, 1e-5) @ w.T, rtol=1e-6)
    assert ids.tolist() == np.argmax(logits, -1).tolist()


def test_attn_o_twin_is_attention_rounded_then_o_projection():
    rng = np.random.default_rng(5)
    nh, nkv, d, page = 6, 2, 8, 4
    lens = np.array([3, 9], np.int32)
    kc = rng.standard_normal((32, nkv, d)).astype(np.float32)
    vc = rng.standard_normal((32, nkv, d)).astype(np.float32)
    tables = np.array([[5, -1, -1], [0, 1, 2]], np.int32)
    q = rng.standard_normal((2, nh, d)).astype(np.float32)
    wo = round_bf16(rng.standard_normal((10, nh * d)).astype(np.float32))
    res = rng.standard_normal((2, 10)).astype(np.float32)
    qs, pos = np.arange(3, dtype=np.int32), lens - 1
    attn = paged_attention(q, kc, vc, pos, qs, lens, tables, page, 0.3).reshape(2, -1)
    got = attn_o_fused_twin(res, q, kc, vc, pos, qs, lens, tables, page, 0.3, wo)
    np.testing.assert_allclose(got, res + round_bf16(attn) @ wo.T, rtol=1e-6, atol=1e-6)


def test_plan_switches_from_the_environment():
    from kernels.cuda import fused_policy as fp

    assert fp.fused_enabled({}) and fp.fused_enabled({"AOTX_FUSED": "1"})
    assert not fp.fused_enabled({"AOTX_FUSED": "0"})
    # attn_o_fused only from T = 4 on by default (H200, 2026-12-01: slower than attention + O at T = 1, 2)
    assert fp.fused_attn_min_t({}) == 4
    assert fp.fused_attn_min_t({"AOTX_FUSED_ATTN": "1"}) == 1
    assert fp.fused_attn_min_t({"AOTX_FUSED_ATTN": "0"}) > 8
    with pytest.raises(ValueError, match="AOTX_FUSED_ATTN"):
        fp.fused_attn_min_t({"AOTX_FUSED_ATTN": "yes"})
