"""CI (no GPU): sample_rows_split (kernels/cuda/sampling_split.cuh, a row over a thread-block cluster) compiles
for sm_90 with its cluster shape in the cubin, without spills, in the shared memory the launcher sizes; the
launcher's constants match the kernel's defines; AOTX_SAMPLE_SPLIT parses strictly. Its ids against
kernels/sampler.py are checked on the GPU (ops/gpu/sampling_check.py, ops/gpu/sampling_bench.py)."""
from __future__ import annotations

import re
import struct

import pytest

from kernels.cuda import build, sample_split as P

MODEL_DEFINES = {"ATT_G": 3, "ATT_D": 64}


@pytest.fixture(scope="module")
def compiled():
    return build.ptxas_report("sampling", "sm_90", MODEL_DEFINES, with_cubin=True)


def _entry(report: str, name: str) -> str:
    return report.split(f"Compiling entry function '{name}'")[1].split("Compile time")[0]


def test_split_kernel_compiles_without_spills(compiled):
    report, cubin = compiled
    entry = _entry(report, "sample_rows_split")
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in entry, entry
    static = int(entry.split(" bytes smem")[0].rsplit(" ", 1)[1])
    # static + the compact list of the model's vocabulary fit the launcher's limit and two blocks an SM (228 KiB)
    assert P.smem(49152) <= P.SMEM_MAX
    assert 2 * (static + P.SMEM_MAX) <= 228 * 1024, entry
    regs = int(re.search(r"Used (\d+) registers", entry).group(1))
    assert 2 * (-(-regs // 8) * 8) * P.SPLIT_THREADS <= 65536, entry   # two blocks an SM by registers too


def test_cluster_shape_is_in_the_cubin(compiled):
    """``__cluster_dims__(8, 1, 1)`` compiles to the kernel's .nv.info attribute EIATTR_CTA_PER_CLUSTER
    (0x3d: format 0x04, 12 bytes, x y z): plain cuLaunchKernel then launches clusters of 8."""
    _, cubin = compiled
    attr = bytes([0x04, 0x3D, 0x0C, 0x00]) + struct.pack("<3I", P.SPLIT_C, 1, 1)
    assert cubin.count(attr) == 1


def test_launcher_constants_match_the_kernel():
    src = (build.SOURCE_DIR / "sampling_split.cuh").read_text()
    assert re.search(rf"#define SPLIT_C {P.SPLIT_C}\b", src)
    assert re.search(rf"#define SPLIT_THREADS {P.SPLIT_THREADS}\b", src)
    assert P.SPLIT_THREADS >= 256 and P.SPLIT_THREADS % 32 == 0   # a thread per histogram bin
    assert '#include "sampling_split.cuh"' in (build.SOURCE_DIR / "sampling.cu").read_text()


def test_split_smem_is_a_slice_of_keys_and_weights():
    assert P.smem(49152) == 6144 * 12
    assert P.smem(50001) == 6251 * 12     # ceil(vocab / 8) tokens a block
    assert P.smem(9) == 2 * 12
    assert P.fits(65536) and not P.fits(65537)


def test_launcher_takes_the_split_kernel_only_where_it_fits():
    src = (build.SOURCE_DIR / "launchers.py").read_text()
    assert "if self.sample_split and n_rows <= self.sample_split_rows and sample_split.fits(vocab):" in src
    assert "smem=sample_split.smem(vocab)" in src and "(n_rows * sample_split.SPLIT_C,), sample_split.SPLIT_THREADS" in src



@pytest.mark.parametrize("value, want", [("1", True), ("0", False)])
def test_sample_split_switch(value, want):
    assert P.wanted({"AOTX_SAMPLE_SPLIT": value}) is want
    assert P.wanted({}) is P.wanted({"AOTX_SAMPLE_SPLIT": ""}) is (P.DEFAULT == "1")


def test_sample_split_switch_rejects_other_values():
    with pytest.raises(ValueError, match="AOTX_SAMPLE_SPLIT"):
        P.wanted({"AOTX_SAMPLE_SPLIT": "yes"})


def test_sample_split_max_rows():
    assert P.max_rows({}) == P.max_rows({"AOTX_SAMPLE_SPLIT_MAX_ROWS": ""}) == P.MAX_ROWS == 64
    assert P.max_rows({"AOTX_SAMPLE_SPLIT_MAX_ROWS": "0"}) == 0
    assert P.max_rows({"AOTX_SAMPLE_SPLIT_MAX_ROWS": "512"}) == 512
    with pytest.raises(ValueError, match="AOTX_SAMPLE_SPLIT_MAX_ROWS"):
        P.max_rows({"AOTX_SAMPLE_SPLIT_MAX_ROWS": "-1"})
