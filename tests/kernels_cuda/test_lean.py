"""CI (no GPU): the lean T <= 8 decode kernels (kernels/cuda/lean.cu, lean_mlp.cu; AOTX_LEAN=1 or 2)
compile for sm_90 with no spills (qkv_lean, o_lean, mlp_lean, omlp_lean: one kernel per row bound; the
64-key attention); the algebra they use on the device (the norm weight folded in, rstd applied to the
dot; the split partials merged by o_lean's prologue) equals the twins; the split policy, the row
bounds and the switch. Device checks: ops/gpu/lean_check.py."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.cuda import build, fused_policy, lean_plan as L
from kernels.cuda.lean_plan import lean_nsplit
from kernels.cuda.lean_twins import combine_partials, qkv_lean_twin, split_partials
from kernels.cuda.twins import round_bf16
from kernels.ops_norm import rmsnorm
from kernels.ops_rope import rope_cos_sin

MODEL_DEFINES = {"ATT_G": 3, "ATT_D": 64}


def test_lean_family_compiles_one_kernel_per_row_bound_without_spills():
    """(sm_90 only: no arch-specific instruction, the device loads the sm_90 cubin.)"""
    log, cubin = build.ptxas_report("lean", "sm_90", MODEL_DEFINES, with_cubin=True)
    assert cubin[:4] == b"\x7fELF"
    for t in L.LEAN_TM:
        for name in (f"qkv_lean_t{t}", f"o_lean_t{t}") + (("lean_attention", "paged_attention_merged") if t == 1
                                                         else ()):
            assert name.encode() in cubin
            entry = log.split(f"Compiling entry function '{name}'")[1].split("Compile time")[0]
            frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", entry)
            assert frame and frame.groups() == ("0", "0", "0"), (name, entry)


def test_mlp_lean_compiles_one_kernel_per_row_bound_without_spills():
    """lean_mlp.cu: phase 2's weights go to shared memory by cp.async, so the 128-register budget of two
    256-thread blocks a multiprocessor (the grid barrier needs 144 resident blocks) holds without spills;
    fused.cu's kernels are not compiled again (FUSED_HELPERS_ONLY)."""
    log, cubin = build.ptxas_report("lean_mlp", "sm_90", MODEL_DEFINES, with_cubin=True)
    assert b"mlp_fused" not in cubin and b"lm_head_argmax" not in cubin
    assert b"omlpq_lean_t8" not in cubin   # (its registers would spill: AOTX_LEAN=3 runs T > 4 as =2)
    for t in L.LEAN_TM:
        for name in (f"mlp_lean_t{t}", f"omlp_lean_t{t}") + ((f"omlpq_lean_t{t}",) if t <= L.OMLPQ_MAX_T else ()):
            assert name.encode() in cubin
            entry = log.split(f"Compiling entry function '{name}'")[1].split("Compile time")[0]
            assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in entry, (name, entry)
            assert int(re.search(r"Used (\d+) registers", entry).group(1)) <= 128


def test_folded_norm_weight_equals_the_norm_then_the_projection():
    """qkv_lean computes rstd * sum_k (w[k] * nw[k]) * x[k], mlp_lean rstd * sum_k w[k] * (x[k] * nw[k]):
    the norm of the reference up to float32 order."""
    rng = np.random.default_rng(5)
    t, k, n = 3, 576, 40
    x = rng.standard_normal((t, k)).astype(np.float32) * 4
    nw = (1 + 0.1 * rng.standard_normal(k)).astype(np.float32)
    w = round_bf16(rng.standard_normal((n, k)).astype(np.float32) / 24)
    rstd = (1.0 / np.sqrt((x * x).sum(1) / k + 1e-5)).astype(np.float32)
    got = ((x @ (w * nw).T) * rstd[:, None]).astype(np.float32)
    np.testing.assert_allclose(got, rmsnorm(x, nw, 1e-5) @ w.T, rtol=2e-5, atol=2e-5)
    got_mlp = (((x * nw) @ w.T) * rstd[:, None]).astype(np.float32)
    np.testing.assert_allclose(got_mlp, rmsnorm(x, nw, 1e-5) @ w.T, rtol=2e-5, atol=2e-5)


def test_qkv_twin_rotates_q_and_k_and_skips_padded_rows():
    rng = np.random.default_rng(9)
    t, h, d, kv = 3, 64, 16, 32   # 4 q heads, 2 kv heads of 16
    cos, sin = rope_cos_sin(np.arange(64), d, 10000.0)
    w = round_bf16(rng.standard_normal((h + 2 * kv, h)).astype(np.float32) / 8)
    res = rng.standard_normal((t, h)).astype(np.float32)
    kc, vc = np.zeros((8, kv), np.float32), np.zeros((8, kv), np.float32)
    pos, slots = np.array([0, 5, 9]), np.array([3, -1, 6])
    q = qkv_lean_twin(res, np.ones(h, np.float32), 1e-5, w, pos, cos, sin, slots, kc, vc, d)
    y = rmsnorm(res, np.ones(h, np.float32), 1e-5) @ w.T
    np.testing.assert_allclose(q[0], y[0, :h], rtol=1e-6)                   # position 0: no rotation
    np.testing.assert_allclose(np.linalg.norm(q[1]), np.linalg.norm(y[1, :h]), rtol=1e-5)   # a rotation
    assert not np.allclose(q[1], y[1, :h])
    np.testing.assert_array_equal(kc[[0, 1, 2, 4, 5, 7]], 0)                # slot -1 wrote nothing
    np.testing.assert_allclose(vc[6], round_bf16(y[2, h + kv:]), rtol=0)


@pytest.mark.parametrize("n_keys", [1, 63, 64, 65, 288, 1000])
@pytest.mark.parametrize("nsplit", [1, 2, 3, 5, 8])
def test_split_partials_merge_to_full_attention(n_keys, nsplit):
    rng = np.random.default_rng(n_keys * 10 + nsplit)
    d = 64
    q = rng.standard_normal(d).astype(np.float32)
    k = rng.standard_normal((n_keys, d)).astype(np.float32)
    v = rng.standard_normal((n_keys, d)).astype(np.float32)
    o, m, l = split_partials(q, k, v, 0.125, L.LEAN_CHUNK, nsplit)
    sc = (k @ q) * 0.125
    p = np.exp(sc - sc.max())
    ref = (p / p.sum()) @ v
    np.testing.assert_allclose(combine_partials(o, m, l), ref, rtol=1e-4, atol=1e-5)
    chunks = -(-n_keys // L.LEAN_CHUNK)
    assert int(np.count_nonzero(m > -np.inf)) == -(-chunks // -(-chunks // nsplit))   # empty splits are inert


def test_host_constants_match_the_sources():
    lean_src = (build.SOURCE_DIR / "lean.cu").read_text()
    assert re.search(r"#define LEAN_CHUNK (\d+)", lean_src).group(1) == str(L.LEAN_CHUNK)
    assert re.search(r"#define LEAN_MAX_SPLITS (\d+)", lean_src).group(1) == str(L.LEAN_MAX_SPLITS)
    for src in (lean_src, (build.SOURCE_DIR / "lean_mlp.cu").read_text()):
        assert tuple(int(x) for x in re.findall(r"^(?:LEAN_KERNELS|MLP_LEAN)\((\d+)\)", src, re.M)) == L.LEAN_TM


def test_auto_picks_the_measured_plan_per_row_bound_and_nothing_above_8_tokens():
    assert fused_policy.lean_mode({"AOTX_LEAN": "auto"}) == fused_policy.LEAN_AUTO
    auto = fused_policy.LEAN_AUTO
    assert [L.mode_for(auto, t) for t in range(1, 9)] == [fused_policy.LEAN_AUTO_MODES[L.lean_tm(t)]
                                                          for t in range(1, 9)]
    assert set(fused_policy.LEAN_AUTO_MODES) == set(L.LEAN_TM)
    assert L.mode_for(auto, 9) == L.mode_for(2, 64) == L.mode_for(0, 1) == 0
    assert L.mode_for(3, 1) == 3 and L.mode_for(1, 8) == 1


def test_each_row_count_runs_on_the_smallest_bound():
    assert [L.lean_tm(t) for t in range(1, 9)] == [1, 2, 4, 4, 8, 8, 8, 8]


def test_lean_nsplit_fills_the_gpu_within_chunks_and_the_cap():
    assert lean_nsplit(1, 288, 3, 132) == 8          # 5 chunks of 64 -> 8 (3 empty), cap 8
    assert lean_nsplit(1, 64, 3, 132) == 1
    assert lean_nsplit(1, 65, 3, 132) == 2
    assert lean_nsplit(8, 288, 3, 132) == 8          # 2 * 132 / 24 = 11 -> 16, capped
    assert lean_nsplit(8, 4000, 3, 132) == L.LEAN_MAX_SPLITS
    assert lean_nsplit(1, 1, 3, 132) == 1


def test_lean_switch_defaults_to_auto_and_0_turns_it_off():
    assert fused_policy.lean_mode({}) == fused_policy.LEAN_AUTO
    assert fused_policy.lean_mode({"AOTX_LEAN": ""}) == fused_policy.LEAN_AUTO
    assert [fused_policy.lean_mode({"AOTX_LEAN": v}) for v in "0123"] == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        fused_policy.lean_mode({"AOTX_LEAN": "yes"})
    assert fused_policy.lean_prefetch({}) is True
    assert fused_policy.lean_prefetch({"AOTX_LEAN_PREFETCH": "0"}) is False
    with pytest.raises(ValueError):
        fused_policy.lean_prefetch({"AOTX_LEAN_PREFETCH": "no"})
