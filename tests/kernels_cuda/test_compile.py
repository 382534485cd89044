"""CI (no GPU): every kernel family compiles to an sm_90 cubin through NVRTC, and the disk cache
is keyed on source + options + arch. Nothing here touches the CUDA driver."""
from __future__ import annotations

import pytest

import cuda.core  # noqa: F401  a declared dependency: without it this must fail, not skip

from kernels.cuda import build

MODEL_DEFINES = {"ATT_G": 3, "ATT_D": 64}   # SmolLM2-135M: 9 heads / 3 KV heads, head dim 64
EXPECTED = {
    "embedding": ["embedding_gather"], "norm": ["add_rmsnorm", "add_rmsnorm_warp"], "rope": ["rope_inplace"],
    "kv_write": ["kv_write"], "swiglu": ["swiglu"], "linear": ["linear_gemv", "linear_mma", "linear_mma_32"],
    "attention": ["paged_attention", "attention_combine"],
    "sampling": ["sample_rows", "adjust_rows", "sample_rows_split"],
    "fused": ["mlp_fused", "lm_head_argmax"], "attn_fused": ["attn_o_fused", "paged_attention"],
    "token_mask": ["token_mask_rows"], "flash_attention": ["flash_prefill", "flash_prefill_k2", "flash_prefill_64",
                                                              "flash_prefill_s3", "flash_prefill_k2_s3",
                                                              "flash_prefill_64_s3"],
    "lean_mlp": ["mlp_lean_t1", "mlp_lean_t8", "omlp_lean_t1", "omlp_lean_t8", "omlpq_lean_t1", "omlpq_lean_t4"],
    "lean": ["qkv_lean_t1", "qkv_lean_t8", "o_lean_t1", "o_lean_t8", "lean_attention",
             "paged_attention_merged"],
    "decode_attention": ["decode_attention_w4_k16_s4", "decode_attention_w2_k16_s4", "decode_attention_w4_k16_s4_l2"],
    "linear_wgmma": ["linear_wgmma_64x64", "linear_wgmma_64x128", "linear_wgmma_128x128", "linear_wgmma_128x256"],
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(build.ENV_CACHE_DIR, str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("family", [f for f in build.FAMILIES if f not in ("linear_wgmma", "decode_attention")])
# (test_wgmma.py and test_decode_attention.py compile those two, with ptxas's report)
def test_family_compiles_for_sm90(family, cache):
    cubin = build.compile_family(family, "sm_90", MODEL_DEFINES)
    assert cubin.data[:4] == b"\x7fELF"          # a cubin is an ELF image
    for name in EXPECTED[family]:
        assert name.encode() in cubin.data        # extern "C" kernel symbol present
    assert not cubin.cached


def test_every_family_is_listed():
    on_disk = sorted(p.stem for p in build.SOURCE_DIR.glob("*.cu"))
    assert sorted(build.FAMILIES) == on_disk == sorted(EXPECTED)


def test_cache_hit_and_key(cache):
    first = build.compile_family("norm", "sm_90")
    again = build.compile_family("norm", "sm_90")
    assert again.cached and again.data == first.data and again.key == first.key
    other_arch = build.compile_family("norm", "sm_80")
    other_defs = build.compile_family("norm", "sm_90", {"X": 1})
    assert len({first.key, other_arch.key, other_defs.key}) == 3
    assert len(list(cache.glob("norm-*.cubin"))) == 3


def test_key_covers_included_headers():
    closure = build.source_closure("linear")
    for name in ("common.cuh", "epilogue.cuh", "rope.cu", "kv_write.cu", "swiglu.cu"):
        assert f"// ---- {name}" in closure
    assert "// ---- wgmma.cuh" in build.source_closure("linear_wgmma")


def test_compile_error_carries_full_log(cache, monkeypatch, tmp_path):
    bad = tmp_path / "src"
    bad.mkdir()
    (bad / "broken.cu").write_text('extern "C" __global__ void k() { undefined_thing_42(); }\n')
    monkeypatch.setattr(build, "SOURCE_DIR", bad)
    with pytest.raises(build.CompileError) as err:
        build.compile_family("broken", "sm_90")
    assert "undefined_thing_42" in str(err.value) and "broken.cu" in str(err.value)


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_token_mask_kernel_compiles(arch, cache):
    cubin = build.compile_family("token_mask", arch, MODEL_DEFINES)
    assert cubin.data[:4] == b"\x7fELF" and b"token_mask_rows" in cubin.data


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_flash_prefill_compiles_without_spills(arch):
    """flash_attention.cu for Hopper: every variant present, no local-memory spills (its fragments are
    register arrays indexed by unrolled constants); the K/V tiles live in dynamic shared memory (the
    launcher's FLASH_SMEM_PER_STAGE per stage and key group), the static part is small."""
    report = build.ptxas_report("flash_attention", arch, MODEL_DEFINES)
    for name in ("flash_prefill", "flash_prefill_k2", "flash_prefill_64", "flash_prefill_s3", "flash_prefill_k2_s3",
                 "flash_prefill_64_s3"):
        entry = report.split(f"Compiling entry function '{name}'")[1].split("Compile time")[0]
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in entry, entry
        smem = int(entry.split(" bytes smem")[0].rsplit(" ", 1)[1])
        assert smem <= 1024, entry
