"""decode_attention (kernels/cuda/decode_attention.cu) on the CPU: its numpy twin against the attention
reference (kernels.ops_attention.paged_attention) on the walks that matter (splits with no tiles, warps with
none, a last tile past the context, empty padded rows, 12-token pages, multi-token chunks), and its plan
(kernels.cuda.decode_plan). The kernel itself: NVRTC compile in test_compile.py, GPU check in
ops/gpu/decode_attention_check.py."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.cuda import decode_plan
from kernels.cuda.decode_attention_twin import _split_range, decode_attention, kv_bytes, split_bf16
from kernels.cuda.twins import round_bf16
from kernels.ops_attention import paged_attention

NH, NKV, D = 9, 3, 64
TOL = {True: 2.5e-3, False: 8e-3}   # ops/gpu/decode_attention_check.py's bounds against the reference, by split


def _case(rng, lens, nq, page, n_pages=64):
    lens, nq = np.array(lens, np.int32), np.array(nq, np.int32)
    kc = round_bf16(rng.standard_normal((n_pages * page, NKV, D)).astype(np.float32))
    vc = round_bf16(rng.standard_normal((n_pages * page, NKV, D)).astype(np.float32))
    width = int(-(-max(int(lens.max()), 1) // page))
    perm, used = rng.permutation(n_pages), 0
    tables = np.full((len(lens), width), -1, np.int32)
    for s, ln in enumerate(lens):
        k = -(-int(ln) // page)
        tables[s, :k] = perm[used:used + k]
        used += k
    qs = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
    positions = np.concatenate([np.arange(ln - n, ln) for ln, n in zip(lens, nq)]).astype(np.int32)
    tok_seq = np.repeat(np.arange(len(lens)), nq).astype(np.int32)
    q = rng.standard_normal((int(qs[-1]), NH, D)).astype(np.float32)
    return q, kc, vc, tok_seq, positions, lens, tables, qs


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("lens,nq,page,warps,keys,nsplit", [
    ([1, 17, 33, 300], [1] * 4, 16, 4, 16, 1),
    ([1, 17, 33, 300], [1] * 4, 16, 4, 16, 3),     # split 2 of the 1-key row: no tiles
    ([300, 5], [1, 1], 16, 4, 32, 2),
    ([160, 70], [1, 1], 12, 2, 16, 4),           # pages of 12: tiles cross pages
    ([100, 40], [20, 1], 16, 8, 16, 1),          # a chunk of 20 tokens: causal limits per token
    ([257], [1], 16, 1, 16, 16),
    ([129], [1], 16, 4, 64, 1),
])
def test_twin_matches_the_reference(lens, nq, page, warps, keys, nsplit, split):
    rng = np.random.default_rng(7)
    q, kc, vc, tok_seq, positions, lens, tables, qs = _case(rng, lens, nq, page)
    ref = paged_attention(q, kc, vc, positions, qs, lens, tables, page, 0.125)
    got = decode_attention(q, kc, vc, tok_seq, positions, lens, tables, page, 0.125, warps, keys, nsplit, split)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert got.dtype == np.float32
    # split: the output's bf16 rounding alone (~0.8-1.7e-3); single bf16 q, P and output: ~2-3e-3
    assert err < (TOL[split] * 0.8 if split else TOL[split] / 2), err
    raw = decode_attention(q, kc, vc, tok_seq, positions, lens, tables, page, 0.125, warps, keys, nsplit, split,
                           round_out=False)
    walk = np.linalg.norm(raw - ref) / np.linalg.norm(ref)   # the walk itself, before the output's rounding
    assert (walk < 1e-5) if split else (3e-4 < walk < 4e-3), walk


def test_split_bf16_parts_hold_sixteen_bits():
    """bf16_rest (decode_attention.cu): hi = bf16(x), lo = bf16(x - hi), both bf16 values; hi + lo is x to
    ~2^-17 relative (one bf16: 2^-9)."""
    x = np.random.default_rng(3).standard_normal(10_000).astype(np.float32) * 30
    hi, lo = split_bf16(x)
    assert np.array_equal(hi.view(np.uint32) & 0xFFFF, np.zeros_like(hi, np.uint32))
    assert np.array_equal(lo.view(np.uint32) & 0xFFFF, np.zeros_like(lo, np.uint32))
    assert np.max(np.abs(hi + lo - x) / np.abs(x)) <= 2.0 ** -16
    assert np.max(np.abs(hi - x) / np.abs(x)) > 2.0 ** -10


def test_twin_padded_row_is_zero():
    """A decode graph's padding row (context 0, table -1) reads nothing and writes zeros."""
    rng = np.random.default_rng(1)
    q, kc, vc, tok_seq, positions, lens, tables, _ = _case(rng, [20], [1], 16)
    lens2 = np.array([20, 0], np.int32)
    tables2 = np.concatenate([tables, np.full((1, tables.shape[1]), -1, np.int32)])
    q2 = np.concatenate([q, q])
    got = decode_attention(q2, kc, vc, np.array([0, 1], np.int32), np.array([19, 0], np.int32), lens2, tables2,
                           16, 0.125, 4, 16, 2)
    assert np.all(got[1] == 0) and np.all(np.isfinite(got[0])) and np.abs(got[0]).max() > 0


def test_split_ranges_cover_the_tiles_once():
    for length in (0, 1, 16, 17, 288, 1000):
        for nsplit in (1, 2, 3, 7, 16):
            ranges = [_split_range(length, 16, nsplit, s) for s in range(nsplit)]
            covered = [kt for tb, te in ranges for kt in range(tb, te)]
            assert covered == list(range(-(-length // 16)))


def test_variants_match_the_kernel_file():
    src = (decode_plan.__file__.rsplit("/", 1)[0]) + "/decode_attention.cu"
    text = open(src).read()
    for v in decode_plan.VARIANTS.values():
        pf, split = 256 if v.l2_hint else 0, "true" if v.split else "false"
        assert f"DA_KERNEL({v.kernel}, {v.warps}, {v.keys}, {v.stages}, {pf}, {split})" in text
        assert v.smem_bytes <= 227 * 1024
    assert decode_plan.VARIANTS["w4_k16_s4"].smem_bytes == 4 * 4 * 2 * 16 * 144
    # the default splits q and P into bf16 hi + lo; the peer keeps session 11's single bf16
    assert decode_plan.VARIANTS[decode_plan.DEFAULT_VARIANT].split
    peer = decode_plan.VARIANTS[decode_plan.SINGLE_BF16_PEER]
    assert not peer.split and peer.name == decode_plan.DEFAULT_VARIANT + "_bf16"


def test_env_switch_is_on_by_default():
    assert decode_plan.variant_from_env({}).name == decode_plan.DEFAULT_VARIANT
    assert decode_plan.variant_from_env({"AOTX_DECODE_MMA": "0"}) is None
    assert decode_plan.variant_from_env({"AOTX_DECODE_MMA": "1"}).name == decode_plan.DEFAULT_VARIANT
    assert decode_plan.variant_from_env({"AOTX_DECODE_MMA": "w8_k16_s3"}).warps == 8
    with pytest.raises(ValueError, match="AOTX_DECODE_MMA"):
        decode_plan.variant_from_env({"AOTX_DECODE_MMA": "yes"})
    v = decode_plan.VARIANTS["w4_k16_s4"]
    assert not decode_plan.applies(None, 256)
    assert not decode_plan.applies(v, decode_plan.MIN_TOKENS - 1) and decode_plan.applies(v, 256)


def test_nsplit_only_for_a_small_grid_over_a_long_context():
    v = decode_plan.VARIANTS["w4_k16_s4"]
    assert decode_plan.nsplit(v, 256, 288, 3, 132) == 1
    assert decode_plan.nsplit(v, 64, 1024, 3, 132) == 1        # measured: unsplit won
    assert decode_plan.nsplit(v, 32, 1024, 3, 132) == 1        # 96 units >= 66
    assert decode_plan.nsplit(v, 16, 288, 3, 132) == 1         # short context
    assert decode_plan.nsplit(v, 16, 2048, 3, 132) == 6        # 48 units: ~2 blocks an SM
    assert decode_plan.nsplit(v, 16, 1024, 3, 132) == 6
    assert decode_plan.nsplit(v, 1, 8192, 3, 132) == decode_plan.MAX_SPLITS
    assert decode_plan.nsplit(decode_plan.VARIANTS["w8_k16_s3"], 16, 1024, 3, 132) == 4   # 64 tiles / (8 x 2)


def test_kv_bytes():
    assert kv_bytes([288] * 256, 3, 64) == 256 * 288 * 3 * 64 * 2 * 2


def _mock_backend(decode_mma):
    """Just what kernels.cuda.step_plan reads, with a kernel table that records its calls."""
    from types import SimpleNamespace

    calls = []

    class Kernels:
        wgmma = None

        def __getattr__(self, name):
            return lambda *args: calls.append((name, args))

    cfg = SimpleNamespace(hidden=576, ffn=1536, rms_eps=1e-5, n_kv_heads=3, n_heads=9, head_dim=64, q_size=576,
                          kv_size=192, vocab_size=49152)
    layer = {"attn_norm": 1, "ffn_norm": 2, "wqkv": 3, "wo": 4, "wgu": 5, "wdown": 6}
    be = SimpleNamespace(config=cfg, k=Kernels(), layers=[layer] * 3, fused=True, fused_norm=False, lean=None,
                         fused_attn_min_t=1, decode_mma=decode_mma, embed=10, residual=11, h=12, q=13, attn=14,
                         act=15, part_o=16, part_ml=17, k_cache=1 << 20, v_cache=1 << 30,
                         layer_kv_bytes=1000, page_size=16, scale=0.125, rope=19, qkv_n=960, logits=20)
    return be, calls


@pytest.fixture
def step_plan(monkeypatch):
    """kernels.cuda.step_plan imported afresh over a stand-in driver (the real one is never imported here: the
    CPU tests must not load it, tests/kernels_cuda/test_cpu_side.py)."""
    import importlib
    import sys
    import types

    import kernels.cuda as pkg

    names = ("step_plan", "launchers", "driver")
    before = {n: pkg.__dict__.get(n) for n in names}   # the package's attributes come back as they were
    monkeypatch.setitem(sys.modules, "kernels.cuda.driver", types.SimpleNamespace())
    for n in names:
        pkg.__dict__.pop(n, None)
        if n != "driver":
            monkeypatch.delitem(sys.modules, f"kernels.cuda.{n}", raising=False)
    yield importlib.import_module("kernels.cuda.step_plan").step_plan
    for n in names:
        sys.modules.pop(f"kernels.cuda.{n}", None)
        pkg.__dict__.pop(n, None)
        if before[n] is not None:
            setattr(pkg, n, before[n])


@pytest.mark.parametrize("t,on,expect", [(256, True, "attention (mma)"), (16, True, "attention (mma)"),
                                         (15, True, "attention"), (256, False, "attention")])
def test_step_plan_routes_attention_by_the_plan(step_plan, t, on, expect):
    v = decode_plan.VARIANTS[decode_plan.DEFAULT_VARIANT] if on else None
    be, calls = _mock_backend(v)
    p = {k: 100 + i for i, k in enumerate(("tokens", "positions", "slots", "tok_seq", "ctx", "rows", "bt"))}
    ops = step_plan(be, t, 0, p, 18, 2)
    names = [n for n, _ in ops]
    assert names.count(expect) == 3
    assert ("attention" in names) != ("attention (mma)" in names)
    for _, launch in ops:
        launch()
    kernel = "decode_attention" if expect == "attention (mma)" else "attention"
    att = [args for name, args in calls if name == kernel]
    assert len(att) == 3
    # each layer's own cache; the splits, and (mma) the variant
    assert [a[2 if kernel == "decode_attention" else 1] for a in att] == [1 << 20, (1 << 20) + 1000, (1 << 20) + 2000]
    if kernel == "decode_attention":
        assert all(a[0] is v and a[15] == 2 and a[-1] == 17 for a in att)   # ..., part_o, part_ml


def test_kernel_compiles_for_sm90_without_spills():
    """Every variant in the sm_90 cubin; no local-memory spills (the fragments are register arrays indexed by
    unrolled constants); the K/V stages are all dynamic shared memory (decode_plan's smem_bytes)."""
    from kernels.cuda import build

    report, cubin = build.ptxas_report("decode_attention", "sm_90", {"ATT_G": 3, "ATT_D": 64}, with_cubin=True)
    assert cubin[:4] == b"\x7fELF"
    for v in decode_plan.VARIANTS.values():
        assert v.kernel.encode() in cubin
        entry = report.split(f"Compiling entry function '{v.kernel}'")[1].split("Compile time")[0]
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in entry, entry
        assert " bytes smem" not in entry, entry   # no static shared memory
        assert int(entry.split("Used ")[1].split(" registers")[0]) <= 128, entry
