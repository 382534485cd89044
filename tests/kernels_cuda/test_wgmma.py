"""linear_wgmma (kernels/cuda/linear_wgmma.cu, wgmma.cuh) on the CPU, no GPU: it compiles for sm_90a without
spills or serialized wgmma; its index logic (128B-swizzled shared tiles, matrix descriptors, accumulator
fragment, the stage ring) run through the numpy emulation (kernels/cuda/wgmma_twin.py) gives exactly
x @ w.T, and the emulation fails when one rule is broken; the plan (kernels/cuda/wgmma_plan.py)."""
from __future__ import annotations

import types

import numpy as np
import pytest

from kernels.cuda import build, wgmma_plan as P, wgmma_twin as T
from kernels.cuda.twins import from_bf16, to_bf16

MAX_SMEM = 227 * 1024   # H100 / H200 dynamic shared memory per block (opt-in)


def test_compiles_for_sm90a_without_spills():
    """sm_90 is upgraded to sm_90a (wgmma needs it); a cubin with every variant (test_compile leaves this
    family to this one NVRTC run: it is the slowest to compile); every variant: no stack, no spills,
    registers within its launch bounds, tiles in dynamic shared memory only, and no ptxas note that it
    serialized wgmma."""
    report, cubin = build.ptxas_report("linear_wgmma", "sm_90", with_cubin=True)
    assert cubin[:4] == b"\x7fELF"
    for name in P.ALL_VARIANTS:
        assert name.encode() in cubin
    assert build.family_arch("linear_wgmma", "sm_90") == "sm_90a"
    assert build.family_arch("linear", "sm_90") == "sm_90"
    assert "linear_wgmma" in build.ON_DEMAND
    for name, (bm, _, _) in P.ALL_VARIANTS.items():
        entry = report.split(f"Compiling entry function '{name}' for 'sm_90a'")[1].split("Compile time")[0]
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in entry, entry
        regs = int(entry.split("Used ")[1].split(" registers")[0])
        assert regs * P.threads(name) <= 64 * 1024 and regs <= 255, entry
        assert " bytes smem" not in entry or int(entry.split(" bytes smem")[0].rsplit(" ", 1)[1]) <= 1024, entry
    assert "wgmma" not in report.lower().replace("linear_wgmma", ""), report   # e.g. "wgmma serialized"


def test_descriptor_fields():
    for addr in (0, 1024, 5 * 1024 + 32 * 3, 200 * 1024):
        f = T.decode_desc(T.wgmma_desc(addr))
        assert f == {"start": addr, "lbo": 16, "sbo": 1024, "base_offset": 0, "layout": 1}


def test_fragment_covers_the_tile_once_in_adjacent_pairs():
    for bn in (64, 128, 256):
        rows, cols = T.fragment_coords(bn)
        flat = rows * bn + cols
        assert sorted(flat.ravel()) == list(range(64 * bn))
        assert (cols[:, 0::2] % 2 == 0).all() and (cols[:, 1::2] == cols[:, 0::2] + 1).all()
        assert (rows[:, 0::2] == rows[:, 1::2]).all()


@pytest.mark.parametrize("ktiles", [1, 2, 3, 9, 24])
@pytest.mark.parametrize("stages", [3, 4, 5])
def test_schedule_loads_each_tile_once_before_use(ktiles, stages):
    ev = T.schedule(ktiles, stages)
    assert [kt for e, kt, _ in ev if e == "load"] == list(range(ktiles))
    assert [kt for e, kt, _ in ev if e == "mma"] == list(range(ktiles))
    first_use = {kt: i for i, (e, kt, _) in enumerate(ev) if e == "mma"}
    assert all(i < first_use[kt] for i, (e, kt, _) in enumerate(ev) if e == "load")


def test_schedule_rejects_loading_one_tile_further_ahead():
    with pytest.raises(AssertionError, match="overwrites a buffer in use"):
        T.schedule(9, 4, ahead=3)


def _ints(rng, shape):
    return to_bf16(rng.integers(-3, 4, shape).astype(np.float32))   # small integers: every sum exact


def _ref(x, w):
    return from_bf16(x).astype(np.float64) @ from_bf16(w).astype(np.float64).T


# every variant; M odd and not a tile multiple, N not a multiple of BN, K = 576 (9 k-tiles) or 1536
@pytest.mark.parametrize("name,m,n,k", [("linear_wgmma_64x64", 77, 200, 576), ("linear_wgmma_64x128", 64, 136, 1536),
                                        ("linear_wgmma_128x128", 129, 264, 576),
                                        ("linear_wgmma_128x256", 256, 520, 576)])
def test_emulation_is_exact(name, m, n, k):
    rng = np.random.default_rng(7)
    x, w = _ints(rng, (m, k)), _ints(rng, (n, k))
    bm, bn, stages = P.VARIANTS[name]
    got = T.emulate(x, w, bm, bn, stages, base=48)   # (dynamic smem not 1024-aligned: the kernel rounds up)
    assert np.array_equal(got, _ref(x, w))


@pytest.mark.parametrize("name,m,n,k", [("linear_wgmma_tma_64x64", 77, 200, 576),
                                        ("linear_wgmma_tma_128x256", 129, 264, 576)])
def test_tma_emulation_is_exact(name, m, n, k):
    """The TMA variants: the boxes as the TMA unit writes them (tma_box, from the swizzle's definition),
    the mbarrier parities of the schedule, the rest as the cp.async variants."""
    rng = np.random.default_rng(8)
    x, w = _ints(rng, (m, k)), _ints(rng, (n, k))
    bm, bn, stages = P.TMA_VARIANTS[name]
    assert np.array_equal(T.emulate(x, w, bm, bn, stages, base=16, tma=True), _ref(x, w))


def test_tma_box_writes_what_the_cp_async_loads_write():
    """Both load paths leave the same shared image, out-of-range rows zero in both."""
    rng = np.random.default_rng(9)
    src = _ints(rng, (70, 192))
    for r0, k0, rows in ((0, 0, 64), (64, 128, 64), (0, 64, 128), (0, 0, 256)):
        a, b = np.zeros(40960, np.uint8), np.zeros(40960, np.uint8)
        T.load_tile(a, 1024, src, r0, k0, rows, 128)
        T.tma_box(b, 1024, src, k0, r0, rows)
        assert np.array_equal(a, b), (r0, k0, rows)


def test_tensor_map_arguments():
    a = P.tensor_map_args(0x7F0000000000, 77, 576, 128)
    assert a["globalDim"] == (576, 77) and a["globalStrides"] == (1152,) and a["boxDim"] == (64, 128)
    assert a["swizzle"] == "CU_TENSOR_MAP_SWIZZLE_128B" and a["oobFill"] == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"
    args = P.encode_args(0x7F0000000000, 77, 576, 128)   # cuda.bindings objects, no driver call
    assert len(args) == 11 and int(args[0]) == int(P_cu().CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
    assert [int(v) for v in args[3]] == [576, 77] and [int(v) for v in args[5]] == [64, 128]
    for bad in ((0x7F0000000008, 77, 576, 64), (0, 77, 576, 257), (0, 77, 100, 64)):
        with pytest.raises(ValueError):
            P.tensor_map_args(*bad)
    import ctypes
    assert ctypes.sizeof(P.TmaMap) == 128
    src = (build.SOURCE_DIR / "wgmma.cuh").read_text()
    assert "struct __align__(64) TmaMap" in src and "u64 v[16];" in src


def P_cu():
    from cuda.bindings import driver as cu
    return cu


def test_emulation_on_random_bf16_matches_float32():
    rng = np.random.default_rng(3)
    x = to_bf16(rng.standard_normal((100, 576)).astype(np.float32))
    w = to_bf16((rng.standard_normal((128, 576)) / 24).astype(np.float32))
    got, ref = T.emulate(x, w, 64, 64, 5), _ref(x, w)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6


def test_emulation_fails_when_a_rule_is_broken(monkeypatch):
    """Sensitivity: storing without the swizzle, a stride byte offset of 512, or tiles left unaligned
    (no round-up to 1024) each give a wrong product."""
    rng = np.random.default_rng(5)
    x, w = _ints(rng, (64, 128)), _ints(rng, (64, 128))
    ref = _ref(x, w)
    with monkeypatch.context() as mp:
        mp.setattr(T, "sw128_offset", lambda row, chunk: row * 128 + (chunk << 4))
        assert not np.array_equal(T.emulate(x, w, 64, 64, 5), ref)
    with monkeypatch.context() as mp:
        mp.setattr(T, "SBO", 512)
        assert not np.array_equal(T.emulate(x, w, 64, 64, 5), ref)
    unaligned = _emulate_unaligned(x, w)
    assert not np.array_equal(unaligned, ref)


def _emulate_unaligned(x, w):
    """The tile of test_emulation_fails_when_a_rule_is_broken stored at byte 512 (not 1024-aligned) and read
    back through descriptors with base offset 0, as the kernel would without its round-up."""
    smem = np.zeros(32768, np.uint8)
    T.load_tile(smem, 512, x, 0, 0, 64, 128)
    T.load_tile(smem, 512 + 64 * 128, w, 0, 0, 64, 128)
    a = T.hw_operand(smem, T.wgmma_desc(512), 64)
    b = T.hw_operand(smem, T.wgmma_desc(512 + 64 * 128), 64)
    return (T._f32(a).astype(np.float64) @ T._f32(b).astype(np.float64).T)


# The fastest TMA tile ops.gpu.wgmma_bench measured on an H100 at each model shape (N, K) and T, the same
# in both runs (session 9 and session 10, 2026-12-07; docs/PERFORMANCE.md): what the fitted cost model
# must pick.
MEASURED_BEST = {
    (960, 576): {64: "64x64", 256: "64x64", 1024: "64x64"},          # qkv
    (576, 576): {64: "64x64", 256: "64x64", 1024: "64x64"},          # o
    (3072, 576): {64: "64x64", 256: "64x64", 1024: "128x256"},       # gate/up
    (576, 1536): {64: "64x64", 256: "64x64", 1024: "64x64"},         # down
    (49152, 576): {64: "64x64", 256: "128x256"},                     # LM head
}


def test_plan_choice_on_the_model_shapes():
    """SmolLM2-135M on 132 SMs: the cost model picks the tile measured fastest at every shape and T."""
    sms = 132
    for (n, k), by_t in MEASURED_BEST.items():
        for t, best in by_t.items():
            assert P.choose(t, n, sms, k) == "linear_wgmma_" + best, (n, k, t)
    assert P.grid("linear_wgmma_128x256", 257, 49152) == (3, 192)
    # a block more than the SMs hold at once costs a second round of blocks
    assert P.cost("linear_wgmma_64x64", 64, 64 * 133, 576, 132) > P.cost("linear_wgmma_64x64", 64, 64 * 132, 576, 132)


def test_plan_limits_and_switch():
    src = (build.SOURCE_DIR / "linear_wgmma.cu").read_text()
    for name, (bm, bn, stages) in P.ALL_VARIANTS.items():
        assert P.smem_bytes(name) <= MAX_SMEM and P.threads(name) == 2 * bm
        assert bm * (bn + T.OUT_PAD) * 4 + 2 * bm * 4 <= stages * (bm + bn) * 128   # output tile + row info fit
        assert f"WG_VARIANT({bm}, {bn}, {stages})" in src
    assert P.TMA_VARIANTS["linear_wgmma_tma_128x256"] == P.VARIANTS["linear_wgmma_128x256"]
    assert P.wgmma_mode({"AOTX_WGMMA": "tma"}) == "tma" and P.wgmma_enabled({"AOTX_WGMMA": "tma"})
    assert P.takes(64, 960, 576) and P.takes(7, 49152, 576) and not P.takes(64, 964, 576) and not P.takes(64, 960, 600)
    assert P.wgmma_enabled({}) and P.DEFAULT == "tma"   # on since make gpu-check passed on an H100
    assert P.wgmma_enabled({"AOTX_WGMMA": "1"}) and not P.wgmma_enabled({"AOTX_WGMMA": "0"})
    assert P.wgmma_mode({}) == "tma" and P.wgmma_mode({"AOTX_WGMMA": ""}) == "tma"
    with pytest.raises(ValueError, match="AOTX_WGMMA"):
        P.wgmma_enabled({"AOTX_WGMMA": "yes"})


@pytest.mark.parametrize("bm,bn", [(64, 64), (64, 128), (128, 128), (128, 256)])
def test_epilogue_chunks_cover_the_tile_once(bm, bn):
    """wgmma_epilogue's split: every eight-column chunk of the tile once, columns 8-aligned, and a warp's
    32 chunks of one step are consecutive chunks in row order (whole 32-byte sectors of adjacent rows)."""
    threads = 2 * bm
    row, col = T.epilogue_chunks(bm, bn, threads)
    assert row.shape == (threads, bm * bn // 8 // threads) and (col % 8 == 0).all()
    flat = row * bn + col
    assert sorted(flat.ravel()) == list(range(0, bm * bn, 8))
    for i in range(row.shape[1]):
        for w0 in range(0, threads, 32):
            assert np.array_equal(np.diff(flat[w0:w0 + 32, i]), np.full(31, 8))


def _epi_case(rng, t):
    from kernels.ops_rope import rope_cos_sin
    nh, nkv, d = 9, 3, 64
    y = (rng.standard_normal((t, (nh + 2 * nkv) * d)) * 3).astype(np.float32)
    pos = rng.integers(0, 8000, t).astype(np.int32)
    slots = rng.choice(1024, t, replace=False).astype(np.int32)
    slots[::5] = -1                       # padding rows: no cache write
    cos, sin = rope_cos_sin(np.arange(8192), d, 100000.0)
    return y, pos, slots, cos, sin, np.stack([cos, sin], -1)


def test_epilogue8_qkv_is_rope_then_kv_write():
    """epi8_fetch / epi8_put's EPI_QKV index logic (rope row and pair, q / k / v split, cache column, skipped
    slots) equals the twins it fuses: apply_rope on q and k, then kv_write of bf16-rounded k and v."""
    from kernels.ops_attention import kv_write
    from kernels.ops_rope import apply_rope
    from kernels.cuda.twins import round_bf16
    rng = np.random.default_rng(11)
    t, hq, kvw = 77, 576, 192
    y, pos, slots, cos, sin, table = _epi_case(rng, t)
    q_out = np.full((t, hq), np.nan, np.float32)
    kc, vc = np.zeros((1024, kvw), np.float32), np.zeros((1024, kvw), np.float32)
    T.epilogue8(T.EPI_QKV, y, q_out, table, pos, slots, kc, vc, head_dim=64, q_size=hq, kv_size=kvw)
    q_ref = apply_rope(y[:, :hq].reshape(t, 9, 64), cos[pos], sin[pos]).reshape(t, hq)
    k_ref = apply_rope(y[:, hq:hq + kvw].reshape(t, 3, 64), cos[pos], sin[pos]).reshape(t, kvw)
    kr, vr = np.zeros_like(kc), np.zeros_like(vc)
    kv_write(kr, vr, round_bf16(k_ref), round_bf16(y[:, hq + kvw:]), slots)
    assert np.allclose(q_out, q_ref, rtol=1e-6, atol=1e-5)
    assert np.array_equal(kc != 0, kr != 0) and np.allclose(kc, kr, rtol=8e-3, atol=1e-3)
    assert np.array_equal(vc, vr)


def test_epilogue8_swiglu_add_store():
    from kernels.ops_mlp import swiglu
    rng = np.random.default_rng(12)
    t, f = 9, 48
    y = rng.standard_normal((t, 2 * f)).astype(np.float32)      # interleaved (gate_j, up_j) columns
    act = np.zeros((t, f), np.float32)
    T.epilogue8(T.EPI_SWIGLU, y, act)
    ref = swiglu(np.concatenate([y[:, 0::2], y[:, 1::2]], 1))
    assert np.allclose(act, ref, rtol=8e-3, atol=1e-3)
    res = rng.standard_normal((t, 2 * f)).astype(np.float32)
    got = res.copy()
    T.epilogue8(T.EPI_ADD, y, got)
    assert np.array_equal(got, res + y)
    out = np.zeros_like(y)
    T.epilogue8(T.EPI_STORE, y, out)
    assert np.array_equal(out, y)


def _epi(mode, out_f32=0, out_bf16=0, ld=0, rope=0, k_cache=0, v_cache=0, head_dim=0, q_size=0, kv_size=0,
         norm_w=0, norm_out=0, ss_out=0, ss_in=0, ss_groups=0):
    """A stand-in for launchers.Epi (not imported: that loads the CUDA driver module, test_cpu_side)."""
    return types.SimpleNamespace(mode=mode, out_f32=out_f32, out_bf16=out_bf16, ld=ld, rope=rope, k_cache=k_cache,
                                 v_cache=v_cache, head_dim=head_dim, q_size=q_size, kv_size=kv_size, norm_w=norm_w,
                                 norm_out=norm_out, ss_out=ss_out, ss_in=ss_in, ss_groups=ss_groups)


def test_epilogue_ok_gates_the_wgmma_path():
    """The eight-column epilogue's alignment needs: the backend's buffers and the model's shapes pass; a row
    stride or base that is not, or a head / q / kv width not a multiple of 8, keeps the GEMM on linear_mma
    (``wants``) and is refused by ``launch``."""
    base = 0x7F0000000000
    qkv = dict(out_f32=base, rope=base, k_cache=base, v_cache=base)
    ok = [_epi(P.EPI_STORE, out_f32=base, ld=49152), _epi(P.EPI_ADD, out_f32=base, ld=576),
          _epi(P.EPI_SWIGLU, out_bf16=base, ld=1536), _epi(P.EPI_QKV, head_dim=64, q_size=576, kv_size=192, **qkv)]
    bad = [_epi(P.EPI_STORE, out_f32=base, ld=50), _epi(P.EPI_ADD, out_f32=base + 8, ld=576),
           _epi(P.EPI_SWIGLU, out_bf16=base + 4, ld=1536), _epi(P.EPI_QKV, head_dim=60, q_size=540, kv_size=180, **qkv)]
    assert all(P.epilogue_ok(e) for e in ok) and not any(P.epilogue_ok(e) for e in bad)
    # the mode numbers are epilogue.cuh's and launchers.py's
    assert "EPI_STORE, EPI_ADD, EPI_SWIGLU, EPI_QKV = 0, 1, 2, 3" in (build.SOURCE_DIR / "launchers.py").read_text()
    src = (build.SOURCE_DIR / "epilogue.cuh").read_text()
    assert (P.EPI_STORE, P.EPI_ADD, P.EPI_SWIGLU, P.EPI_QKV) == (0, 1, 2, 3)
    assert all(f"#define {name} {v}" in src for name, v in (("EPI_STORE", 0), ("EPI_ADD", 1), ("EPI_SWIGLU", 2),
                                                             ("EPI_QKV", 3)))
    # the folded RMSNorm: a producer needs an EPI_ADD with ld = 64 ss_groups, a consumer K = 64 ss_groups
    fold = dict(norm_w=base, norm_out=base, ss_out=base, ss_groups=9)
    assert P.epilogue_ok(_epi(P.EPI_ADD, out_f32=base, ld=576, **fold))
    assert not P.epilogue_ok(_epi(P.EPI_STORE, out_f32=base, ld=576, **fold))
    assert not P.epilogue_ok(_epi(P.EPI_ADD, out_f32=base, ld=576, **{**fold, "ss_groups": 8}))
    assert not P.epilogue_ok(_epi(P.EPI_ADD, out_f32=base, ld=576, **{**fold, "norm_out": base + 8}))
    consumer = _epi(P.EPI_SWIGLU, out_bf16=base, ld=1536, ss_in=base, ss_groups=9)
    assert P.epilogue_ok(consumer, 576) and not P.epilogue_ok(consumer, 1536)
    wg = P.Wgmma.__new__(P.Wgmma)          # wants() needs no device
    assert wg.wants(1024, 3072, 576, consumer) and not wg.wants(1024, 576, 1536, consumer)
    assert wg.wants(1024, 960, 576, ok[3]) and not wg.wants(1024, 960, 576, bad[0]) and wg.wants(1024, 960, 576)
    with pytest.raises(ValueError, match="epilogue"):
        P.Wgmma.launch(wg, base, 1024, base, 960, 576, bad[1])


def test_folded_rmsnorm_equals_the_norm_then_the_gemm():
    """norm_fusion's identity through the numpy mirror of the epilogue: o's EPI_ADD with norm_out writes
    r = residual + y, h = bf16(r * w) and each 64 columns' sum of r^2; gate/up's epilogue with ss_in scales its
    rows by rstd from those sums. Against the unfolded twin (add, rmsnorm, bf16, GEMM): within bf16 rounding;
    the residual exactly; the sums to float32 accuracy."""
    from kernels.ops_norm import rmsnorm
    from kernels.cuda.twins import round_bf16
    rng = np.random.default_rng(13)
    t, h, f = 21, 576, 96
    res, y = rng.standard_normal((t, h)).astype(np.float32), rng.standard_normal((t, h)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    wg = (rng.standard_normal((f, h)) / 24).astype(np.float32)
    r, hb, ss = res.copy(), np.zeros((t, h), np.float32), np.zeros((t, h // 64), np.float32)
    T.epilogue8(T.EPI_ADD, y, r, norm_w=w, norm_out=hb, ss_out=ss, ss_groups=h // 64, eps=1e-5)
    assert np.array_equal(r, res + y)
    assert np.allclose(ss.sum(1), ((res + y).astype(np.float64) ** 2).sum(1), rtol=1e-5)
    assert np.allclose(ss, ((res + y) ** 2).reshape(t, h // 64, 64).sum(-1), rtol=1e-5)
    folded = np.zeros((t, f), np.float32)
    T.epilogue8(T.EPI_STORE, hb @ wg.T, folded, ss_in=ss, ss_groups=h // 64, eps=1e-5)
    ref = round_bf16(rmsnorm(res + y, w, 1e-5)) @ wg.T
    assert np.linalg.norm(folded - ref) / np.linalg.norm(ref) < 8e-3
