"""When the projections and the LM head run on linear_wgmma (kernels/cuda/linear_wgmma.cu), and which tile.

* ``AOTX_WGMMA=1``: every projection of a step of at least ``MIN_T`` tokens (the QKV, O, gate/up, down
  GEMMs and the LM head over at least ``MIN_T`` rows) uses linear_wgmma, with the same fused epilogues
  as linear_mma; smaller steps keep linear_gemv / linear_mma. ``AOTX_WGMMA=tma``: the same with the
  linear_wgmma_tma_* kernels (the TMA unit copies the tiles: ``tensor_map_args``). ``0``: never.
  ``tma`` BY DEFAULT (unset means ``DEFAULT``) since ``make gpu-check ARGS=--real`` passed on an H100
  (2026-12-07: every wgmma_check line, real-weights prefill/decode at T = 2,214 / 60 with both modes;
  generate 1.16x / 1.13x linear_mma at batch 64 / 256, greedy tokens equal in 100 % of places,
  docs/PERFORMANCE.md "GPU call set of session 9").
* Tiles: (BM, BN) = 64 x 64, 64 x 128, 128 x 128 or 128 x 256 (``VARIANTS``; BM = 64 per warpgroup).
  ``choose`` takes the one of least modelled time (``cost``: blocks per SM x a block's tensor-core time,
  with wgmma's efficiency by N fitted to H100 measurements, plus a fixed fill / epilogue latency;
  ops.gpu.wgmma_bench prints every variant at the model's shapes, and the plan's pick).
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping

DEFAULT = "tma"
MIN_T = 64
# epilogue.cuh's EPI_STORE / EPI_ADD / EPI_SWIGLU / EPI_QKV (launchers.EPI_*; not imported from there: this
# module must load without the driver, as the CPU tests do)
EPI_STORE, EPI_ADD, EPI_SWIGLU, EPI_QKV = 0, 1, 2, 3
BK = 64
# name -> (BM, BN, STAGES), as instantiated at the end of linear_wgmma.cu
VARIANTS = {
    "linear_wgmma_64x64": (64, 64, 5),
    "linear_wgmma_64x128": (64, 128, 4),
    "linear_wgmma_128x128": (128, 128, 4),
    "linear_wgmma_128x256": (128, 256, 4),
}
TMA_PREFIX = "linear_wgmma_tma_"
# the same tiles with TMA loads (linear_wgmma_tma_64x64, ...): arguments (amap, wmap, M, N, K, Epi)
TMA_VARIANTS = {v.replace("linear_wgmma_", TMA_PREFIX): t for v, t in VARIANTS.items()}
ALL_VARIANTS = {**VARIANTS, **TMA_VARIANTS}
MODES = ("0", "1", "tma")


def wgmma_mode(env: Mapping[str, str]) -> str:
    """"0" (off), "1" (linear_wgmma, cp.async loads) or "tma" (linear_wgmma_tma_*)."""
    value = env.get("AOTX_WGMMA", DEFAULT) or DEFAULT
    if value not in MODES:
        raise ValueError(f"AOTX_WGMMA must be 0, 1 or tma, got {value!r}")
    return value


def wgmma_enabled(env: Mapping[str, str]) -> bool:
    return wgmma_mode(env) != "0"


class TmaMap(ctypes.Structure):
    """Mirror of ``struct TmaMap`` in wgmma.cuh: a CUtensorMap's 128 bytes, passed by value."""
    _fields_ = [("v", ctypes.c_uint64 * 16)]


def tensor_map_args(ptr: int, rows: int, k: int, box_rows: int) -> dict:
    """cuTensorMapEncodeTiled's arguments for a bf16 row-major [rows, k] matrix at ``ptr`` read in boxes of
    ``box_rows`` rows by 64 of K (128 bytes: the swizzle span) into the 128B-swizzled layout of wgmma.cuh;
    elements past ``rows`` read as zeros. Enum members by name (cuda.bindings.driver)."""
    if ptr % 16 or (k * 2) % 16 or not 1 <= box_rows <= 256 or rows < 1:
        raise ValueError(f"TMA needs a 16-byte aligned base and row pitch and 1..256 box rows: {ptr:#x} {k} {box_rows}")
    return {"tensorDataType": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "tensorRank": 2, "globalAddress": ptr,
            "globalDim": (k, rows), "globalStrides": (k * 2,), "boxDim": (BK, box_rows), "elementStrides": (1, 1),
            "interleave": "CU_TENSOR_MAP_INTERLEAVE_NONE", "swizzle": "CU_TENSOR_MAP_SWIZZLE_128B",
            "l2Promotion": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "oobFill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"}


def encode_args(ptr: int, rows: int, k: int, box_rows: int) -> tuple:
    """``tensor_map_args`` as cuda.bindings.driver objects, in cuTensorMapEncodeTiled's order (no driver call)."""
    from cuda.bindings import driver as cu

    a = tensor_map_args(ptr, rows, k, box_rows)
    u64 = lambda xs: [cu.cuuint64_t(x) for x in xs]  # noqa: E731
    u32 = lambda xs: [cu.cuuint32_t(x) for x in xs]  # noqa: E731
    return (getattr(cu.CUtensorMapDataType, a["tensorDataType"]), a["tensorRank"], a["globalAddress"],
            u64(a["globalDim"]), u64(a["globalStrides"]), u32(a["boxDim"]), u32(a["elementStrides"]),
            getattr(cu.CUtensorMapInterleave, a["interleave"]), getattr(cu.CUtensorMapSwizzle, a["swizzle"]),
            getattr(cu.CUtensorMapL2promotion, a["l2Promotion"]), getattr(cu.CUtensorMapFloatOOBfill, a["oobFill"]))


def encode_tensor_map(ptr: int, rows: int, k: int, box_rows: int) -> TmaMap:
    """The CUtensorMap of ``tensor_map_args`` (a driver call: GPU only)."""
    from cuda.bindings import driver as cu

    from kernels.cuda import driver

    tmap = driver.check(cu.cuTensorMapEncodeTiled(*encode_args(ptr, rows, k, box_rows)))
    return TmaMap((ctypes.c_uint64 * 16)(*[int(x) for x in tmap.opaque]))


def takes(m: int, n: int, k: int) -> bool:
    """Shapes linear_wgmma computes: K a multiple of 64, N of 8 (the model's: K 576 / 1536)."""
    return m >= 1 and n >= 8 and n % 8 == 0 and k >= BK and k % BK == 0


def epilogue_ok(e, k: int | None = None) -> bool:
    """linear_wgmma's epilogue (epilogue.cuh epi8_*) writes eight columns at once: float32 rows of ``ld`` (a
    multiple of 4) from a 16-byte aligned base, bf16 SwiGLU rows of ``ld`` (a multiple of 4) from an 8-byte
    aligned one; EPI_QKV: head_dim, q_size and kv_size multiples of 8, q out, caches and rope table 16-byte
    aligned. The folded RMSNorm: norm_out (EPI_ADD only) with ss_out and norm_w, ld = 64 ss_groups, all 16-byte
    aligned; ss_in with the GEMM's K (``k``, when given) = 64 ss_groups. ``e``: a launchers.Epi. (Every buffer
    the backend allocates, and the model's shapes, pass.)"""
    if e.norm_out and not (e.mode == EPI_ADD and e.ss_out and e.norm_w and e.ld == 64 * e.ss_groups
                           and all(p % 16 == 0 for p in (e.norm_out, e.ss_out, e.norm_w))):
        return False
    if e.ss_in and not (e.ss_groups > 0 and e.ss_in % 4 == 0 and (k is None or k == 64 * e.ss_groups)):
        return False
    if e.mode in (EPI_STORE, EPI_ADD):
        return e.ld % 4 == 0 and e.out_f32 % 16 == 0
    if e.mode == EPI_SWIGLU:
        return e.ld % 4 == 0 and e.out_bf16 % 8 == 0
    if e.mode == EPI_QKV:
        return (e.head_dim % 8 == 0 and e.q_size % 8 == 0 and e.kv_size % 8 == 0
                and all(p % 16 == 0 for p in (e.out_f32, e.k_cache, e.v_cache, e.rope)))
    return False


def threads(name: str) -> int:
    return 2 * ALL_VARIANTS[name][0]      # one warpgroup (128 threads) per 64 rows


def smem_bytes(name: str) -> int:
    bm, bn, stages = ALL_VARIANTS[name]
    return stages * (bm + bn) * 128 + 1024 + 64   # + the slack to align the tiles to 1024, + the mbarriers


def grid(name: str, m: int, n: int) -> tuple[int, int]:
    bm, bn, _ = ALL_VARIANTS[name]
    return -(-m // bm), -(-n // bn)


# The cost model of `choose` (relative units). A block's tensor-core time is 2 BM BN K / (FLOP_PER_CLK *
# EFF[BN]) clocks: an SM does ~4,096 dense bf16 FLOP a clock (989 TFLOP/s / 132 SMs / 1.83 GHz); blocks
# beyond one per SM queue (or share the SM: the same tensor cores); LAT_CLK is the pipeline fill and the
# epilogue, paid once (the same for every tile, so it never changes the pick). EFF is FITTED to what
# ops.gpu.wgmma_bench measured for the TMA variants on an H100 (sessions 9 and 10, 2026-12-07: the 14
# model shapes x T of each run): with these values `choose` picks the fastest tile at every one of them
# in both runs, where the first guess ({64: 0.6, 128: 0.85, 256: 0.9}) lost up to 1.44x at T = 1,024
# (prefill) and 1.36x on gate/up at T = 256. The 64 x 128 tile measures below its share of the
# tensor cores (one warpgroup, four stages), hence its low EFF; docs/PERFORMANCE.md, session 10.
FLOP_PER_CLK = 4096
EFF = {64: 0.5, 128: 0.35, 256: 0.8}
LAT_CLK = 2000


def cost(name: str, m: int, n: int, k: int, sm_count: int) -> float:
    bm, bn, _ = VARIANTS[name]
    gx, gy = grid(name, m, n)
    per_block = 2 * bm * bn * k / (FLOP_PER_CLK * EFF[bn])
    return -(-gx * gy // sm_count) * per_block + LAT_CLK


@functools.lru_cache(maxsize=4096)   # (a launch asks once per GEMM: ~10 us of Python a time uncached)
def choose(m: int, n: int, sm_count: int, k: int = 576) -> str:
    """The variant of least `cost` (ties: the smaller tile, listed first in VARIANTS)."""
    return min(VARIANTS, key=lambda v: cost(v, m, n, k, sm_count))


class Wgmma:
    """linear_wgmma loaded into a launchers.Kernels (its own sm_90a cubin, compiled on first use); ``tma``:
    the plan's picks run as linear_wgmma_tma_*."""

    MAX_MAPS = 4096

    def __init__(self, kernels, tma: bool = False, defines: Mapping[str, int] | None = None):
        from kernels.cuda import build, driver

        self.k, self.tma = kernels, tma
        cubin = build.compile_family("linear_wgmma", kernels.device.arch, dict(defines or {}))
        self.module = driver.Module(cubin.data)
        for name in ALL_VARIANTS:
            kernels.f[name] = self.module.function(name)
            driver.set_max_dynamic_smem(kernels.f[name], smem_bytes(name))
        self._maps: dict[tuple[int, int, int, int], TmaMap] = {}
        self._shapes: dict[tuple, tuple] = {}

    def tensor_map(self, ptr: int, rows: int, k: int, box_rows: int) -> TmaMap:
        """Encoded once per (buffer, rows, K, box): a decode graph keeps the bytes it captured."""
        key = (ptr, rows, k, box_rows)
        tmap = self._maps.get(key)
        if tmap is None:
            if len(self._maps) >= self.MAX_MAPS:
                self._maps.clear()
            tmap = self._maps[key] = encode_tensor_map(ptr, rows, k, box_rows)
        return tmap

    def _shape(self, m: int, n: int, k: int, variant: str | None) -> tuple:
        """(kernel, grid, threads, dynamic smem, TMA box rows of A and W or 0) of a launch; cached per shape."""
        name = variant or choose(m, n, self.k.device.sm_count, k)
        if variant is None and self.tma:
            name = name.replace("linear_wgmma_", TMA_PREFIX)
        gx, gy = grid(name, m, n)
        if gy > 65535:
            raise ValueError(f"linear_wgmma: {gy} column tiles exceed gridDim.y")
        bm, bn, _ = TMA_VARIANTS[name] if name in TMA_VARIANTS else (0, 0, 0)
        return name, (gx, gy), threads(name), smem_bytes(name), bm, bn

    def wants(self, m: int, n: int, k: int, e=None) -> bool:
        return m >= MIN_T and takes(m, n, k) and (e is None or epilogue_ok(e, k))

    def launch(self, a: int, m: int, w: int, n: int, k: int, e, variant: str | None = None,
               checked: bool = False) -> str:
        """bf16 a [m, k] @ W [n, k]^T into epilogue ``e`` (launchers.Epi); returns the variant used. ``checked``:
        the caller has just asked ``wants`` (launchers.Kernels.mma), so the shape checks are not repeated."""
        if not checked and not takes(m, n, k):
            raise ValueError(f"linear_wgmma takes K % {BK} == 0 and N % 8 == 0, got m={m} n={n} k={k}")
        if not checked and not epilogue_ok(e, k):
            raise ValueError(f"linear_wgmma's epilogue needs aligned rows and outputs (epilogue_ok), got mode {e.mode} "
                             f"ld {e.ld}")
        shape = self._shapes.get((m, n, k, variant, self.tma))
        if shape is None:
            if len(self._shapes) >= self.MAX_MAPS:
                self._shapes.clear()
            shape = self._shapes[(m, n, k, variant, self.tma)] = self._shape(m, n, k, variant)
        name, grid_, nthreads, smem, bm, bn = shape
        if bm:
            args = (self.tensor_map(a, m, k, bm), self.tensor_map(w, n, k, bn), m, n, k, e)
            self.k._go(name, grid_, nthreads, args, "ssiiis", smem=smem)
        else:
            self.k._go(name, grid_, nthreads, (a, m, w, n, k, e), "pipiis", smem=smem)
        return name
