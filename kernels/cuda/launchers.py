"""Program: the compiled kernel families loaded on a device, one Python call per kernel.

Arguments are device pointers (ints) and sizes; every launch goes on the device's stream, so a
sequence of calls can be captured into a CUDA graph unchanged.
"""
from __future__ import annotations

import ctypes
import os

from kernels.cuda import build, decode_plan, driver, sample_split
from kernels.cuda.lean_plan import LEAN_MAX_SPLITS, LEAN_TM, OMLPQ_MAX_T, lean_tm

EPI_STORE, EPI_ADD, EPI_SWIGLU, EPI_QKV = 0, 1, 2, 3
GEMV_MAX_T = 8
GEMV_ROWS_PER_BLOCK = 8      # 4 warps x an adjacent pair of output columns
MMA_TILE = 64
ATT_CHUNK = 128
FUSED_THREADS = 256          # fused.cu: 8 warps a block
AO_THREADS = 128             # attn_fused.cu: the attention block
FUSED_MAX_K = 768
MAX_SPLITS_BUF = 16          # kernels.cuda.backend.MAX_SPLITS: the partial buffers' splits
LEAN_QKV_WARPS = 4
LEAN_O_WARPS = 8
NORM_WARPS, NORM_MAX_PAIRS = 8, 16   # norm.cu add_rmsnorm_warp: rows (warps) a block; float2 a lane at most
LM_TILE = 16                 # lm_head_argmax: vocab columns per tile (a pair per warp)
# flash_attention.cu: (query tokens per tile, key groups per block) -> kernel; dynamic shared memory
# (the _s3 kernels: three K/V stages instead of two, Kernels.flash_stages = 3, AOTX_FLASH_STAGES=3)
FLASH_KERNELS = {(16, 1): "flash_prefill", (16, 2): "flash_prefill_k2", (64, 1): "flash_prefill_64"}
FLASH_STAGES = (2, 3)
FLASH_SMEM_PER_STAGE = 2 * 64 * 72 * 2           # (K, V) x 64 keys x 72 padded dims x bf16, a key group
FLASH_SMEM_PER_KEY_GROUP = 2 * FLASH_SMEM_PER_STAGE


def flash_kernel(bq: int, ks: int, stages: int) -> str:
    return FLASH_KERNELS[(bq, ks)] + ("" if stages == 2 else f"_s{stages}")


def flash_stages(env) -> int:
    """AOTX_FLASH_STAGES: 2 (the default: one round of K/V landing while one is computed) or 3."""
    value = env.get("AOTX_FLASH_STAGES", "2") or "2"
    if value not in ("2", "3"):
        raise ValueError(f"AOTX_FLASH_STAGES must be 2 or 3, got {value!r}")
    return int(value)


def mlp_grid(hidden: int, ffn: int) -> int:
    """mlp_fused's blocks: 4 down-projection columns each (>= hidden / 4), and enough warps that
    phase 1 takes at most 2 gate/up pairs per warp."""
    return max(-(-hidden // 4), -(-ffn // (2 * 8)))


class QkvNext(ctypes.Structure):
    """Mirror of ``struct QkvNext`` in lean_mlp.cu (8 pointers, then 4 ints)."""
    _fields_ = [("W", ctypes.c_uint64), ("norm_w", ctypes.c_uint64), ("positions", ctypes.c_uint64),
                ("rope", ctypes.c_uint64), ("slots", ctypes.c_uint64), ("q_out", ctypes.c_uint64),
                ("k_cache", ctypes.c_uint64), ("v_cache", ctypes.c_uint64), ("N", ctypes.c_int32),
                ("head_dim", ctypes.c_int32), ("q_size", ctypes.c_int32), ("kv_size", ctypes.c_int32)]


class Epi(ctypes.Structure):
    """Mirror of ``struct Epi`` in epilogue.cuh (7 pointers, 5 ints, then the folded RMSNorm's 4 pointers, an
    int and a float: linear_wgmma only, zero elsewhere)."""
    _fields_ = [("out_f32", ctypes.c_uint64), ("out_bf16", ctypes.c_uint64),
                ("positions", ctypes.c_uint64), ("rope", ctypes.c_uint64), ("slots", ctypes.c_uint64),
                ("k_cache", ctypes.c_uint64), ("v_cache", ctypes.c_uint64),
                ("mode", ctypes.c_int32), ("ld", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("q_size", ctypes.c_int32), ("kv_size", ctypes.c_int32),
                ("norm_w", ctypes.c_uint64), ("norm_out", ctypes.c_uint64), ("ss_out", ctypes.c_uint64),
                ("ss_in", ctypes.c_uint64), ("ss_groups", ctypes.c_int32), ("eps", ctypes.c_float)]


def epi(mode: int, out_f32: int = 0, out_bf16: int = 0, ld: int = 0, positions: int = 0, rope: int = 0,
        slots: int = 0, k_cache: int = 0, v_cache: int = 0, head_dim: int = 0, q_size: int = 0,
        kv_size: int = 0, norm_w: int = 0, norm_out: int = 0, ss_out: int = 0, ss_in: int = 0, ss_groups: int = 0,
        eps: float = 0.0) -> Epi:
    return Epi(out_f32, out_bf16, positions, rope, slots, k_cache, v_cache, mode, ld, head_dim, q_size, kv_size,
               norm_w, norm_out, ss_out, ss_in, ss_groups, eps)


class Kernels:
    def __init__(self, device: driver.Device, n_heads: int, n_kv_heads: int, head_dim: int):
        self.device = device
        self.att_g = n_heads // n_kv_heads
        defines = {"ATT_G": n_heads // n_kv_heads, "ATT_D": head_dim}
        self.cubins = build.compile_all(device.arch, defines)
        self.modules = {f: driver.Module(c.data) for f, c in self.cubins.items()}
        self.f = {}
        for fam, names in {"embedding": ["embedding_gather"], "norm": ["add_rmsnorm", "add_rmsnorm_warp"],
                           "rope": ["rope_inplace"], "kv_write": ["kv_write"], "swiglu": ["swiglu"],
                           "linear": ["linear_gemv", "linear_mma", "linear_mma_32"],
                           "attention": ["paged_attention", "attention_combine"],
                           "sampling": ["sample_rows", "adjust_rows"], "fused": ["mlp_fused", "lm_head_argmax"],
                           "attn_fused": ["attn_o_fused"], "token_mask": ["token_mask_rows"],
                           "flash_attention": [flash_kernel(bq, ks, st) for (bq, ks) in FLASH_KERNELS
                                               for st in FLASH_STAGES],
                           "decode_attention": [v.kernel for v in decode_plan.VARIANTS.values()]}.items():
            for n in names:
                self.f[n] = self.modules[fam].function(n)
        driver.set_max_dynamic_smem(self.f["linear_gemv"], 96 * 1024)
        for bq, ks in FLASH_KERNELS:
            for st in FLASH_STAGES:
                driver.set_max_dynamic_smem(self.f[flash_kernel(bq, ks, st)], ks * st * FLASH_SMEM_PER_STAGE)
        # decode_attention.cu (kernels.cuda.decode_plan): each variant's shared memory; its resident blocks (the bench)
        self.decode_resident = {}
        for v in decode_plan.VARIANTS.values():
            driver.set_max_dynamic_smem(self.f[v.kernel], v.smem_bytes)
            self.decode_resident[v.name] = driver.max_active_blocks(
                self.f[v.kernel], v.threads, v.smem_bytes) * device.sm_count
        self.flash_stages = flash_stages(os.environ)   # flash_attention's K/V pipeline depth (2 or 3)
        # lm_head_argmax is persistent: as many blocks as are resident at once
        self._lm_grid = driver.max_active_blocks(self.f["lm_head_argmax"], FUSED_THREADS) * device.sm_count
        self._ao_resident = driver.max_active_blocks(self.f["attn_o_fused"], AO_THREADS) * device.sm_count
        # lean.cu (AOTX_LEAN=1, kernels.cuda.lean_plan): one kernel per T; its own paged_attention copy
        # (ATT_CHUNK = LEAN_CHUNK keys a chunk), which launches no combine: o_lean merges the splits
        lean = self.modules["lean"]
        self.lean_f = {"attention": lean.function("lean_attention"),
                       "attention_merged": lean.function("paged_attention_merged")}
        self.lean_prefetch = True   # lean attention: older K/V rows staged before the wait (AOTX_LEAN_PREFETCH)
        for tm in LEAN_TM:
            self.lean_f[("qkv", tm)] = lean.function(f"qkv_lean_t{tm}")
            self.lean_f[("o", tm)] = lean.function(f"o_lean_t{tm}")
            self.lean_f[("mlp", tm)] = self.modules["lean_mlp"].function(f"mlp_lean_t{tm}")
            self.lean_f[("omlp", tm)] = self.modules["lean_mlp"].function(f"omlp_lean_t{tm}")
            if tm <= OMLPQ_MAX_T:
                self.lean_f[("omlpq", tm)] = self.modules["lean_mlp"].function(f"omlpq_lean_t{tm}")
        # sampling.cu's sample_rows_split (a row over a cluster of sample_split.SPLIT_C blocks, sm_90) with
        # AOTX_SAMPLE_SPLIT=1 (or ``sample_split = True``), else sample_rows (a block a row): the same ids
        clusters = int(device.arch[3:]) >= 90
        self.sample_split = sample_split.wanted(os.environ) and clusters
        self.sample_split_rows = sample_split.max_rows(os.environ)     # (larger steps: a block a row)
        if clusters:
            self.f["sample_rows_split"] = self.modules["sampling"].function("sample_rows_split")
            driver.set_max_dynamic_smem(self.f["sample_rows_split"], sample_split.SMEM_MAX)
        self.pdl = False  # launch with programmatic dependent launch (set per step by the backend)
        self.wgmma = None  # kernels.cuda.wgmma_plan.Wgmma when AOTX_WGMMA=1: mma() of >= 64 rows goes there

    def fused_ok(self, hidden: int, ffn: int, vocab: int) -> bool:
        """The fused T <= 8 kernels (fused.cu) take these shapes, and mlp_fused's grid (its grid
        barrier needs every block resident at once) fits the GPU."""
        shapes = (hidden % 8 == 0 and hidden <= FUSED_MAX_K and ffn % 32 == 0 and ffn <= 2048
                  and vocab % LM_TILE == 0 and ffn <= 2 * mlp_grid(hidden, ffn) * 8)
        resident = driver.max_active_blocks(self.f["mlp_fused"], FUSED_THREADS) * self.device.sm_count
        return shapes and mlp_grid(hidden, ffn) <= resident

    def mlp_fused(self, residual, norm_w, eps, wgu, wd, act, hidden, ffn, t, bar):
        """residual[t, hidden] += down(bf16 SwiGLU(gate_up(rmsnorm(residual)))), one launch."""
        if not 1 <= t <= GEMV_MAX_T:
            raise ValueError(f"mlp_fused takes 1..{GEMV_MAX_T} rows, got {t}")
        self._go("mlp_fused", (mlp_grid(hidden, ffn),), FUSED_THREADS,
                 (residual, norm_w, eps, wgu, wd, act, hidden, ffn, t, bar), "ppfpppiiip")

    def lm_head_argmax(self, residual, rows, norm_w, eps, w, vocab, hidden, t, logits, keys, counter, ids):
        """ids[t] = greedy argmax of the LM head on rmsnorm(residual[rows[t]]); logits stored if non-null."""
        if not 1 <= t <= GEMV_MAX_T:
            raise ValueError(f"lm_head_argmax takes 1..{GEMV_MAX_T} rows, got {t}")
        self._go("lm_head_argmax", (max(1, min(vocab // LM_TILE, self._lm_grid)),), FUSED_THREADS,
                 (residual, rows, norm_w, eps, w, vocab, hidden, t, logits, keys, counter, ids), "pppfpiiipppp")

    def attn_o_fused(self, q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride,
                     page_size, scale, n_tokens, n_kv, nsplit, attn, part_o, part_ml, wo, residual, hidden,
                     counters, bar):
        """residual[t] += O(paged attention of q[t]) for t < n_tokens <= 8, one launch (attn_fused.cu)."""
        if not 1 <= n_tokens <= GEMV_MAX_T:
            raise ValueError(f"attn_o_fused takes 1..{GEMV_MAX_T} rows, got {n_tokens}")
        grid = min(max(-(-hidden // (2 * AO_THREADS // 32)), n_tokens * n_kv * nsplit), self._ao_resident)
        if grid * (AO_THREADS // 32) * 2 < hidden:
            raise ValueError("attn_o_fused: the resident grid cannot cover the O projection")
        self._go("attn_o_fused", (grid,), AO_THREADS,
                 (q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size, scale,
                  n_kv, nsplit, attn, part_o, part_ml, wo, residual, hidden, n_tokens, counters, bar),
                 "pppppppiifiipppppiipp")

    def lean_ok(self, hidden: int, ffn: int, vocab: int) -> bool:
        """fused_ok, and every mlp_lean_t<T> grid (a grid barrier) resident at once."""
        grid = mlp_grid(hidden, ffn)
        return self.fused_ok(hidden, ffn, vocab) and all(
            driver.max_active_blocks(self.lean_f[(kind, t)], FUSED_THREADS) * self.device.sm_count >= grid
            for t in LEAN_TM for kind in ("mlp", "omlp", "omlpq") if (kind, t) in self.lean_f)

    def mlp_lean(self, residual, norm_w, eps, wgu, wd, act, hidden, ffn, t, bar):
        """mlp_fused for exactly t rows (lean_mlp.cu mlp_lean_t<t>): same result, same barrier word."""
        if not 1 <= t <= GEMV_MAX_T:
            raise ValueError(f"mlp_lean takes 1..{GEMV_MAX_T} rows, got {t}")
        driver.launch(self.lean_f[("mlp", lean_tm(t))], (mlp_grid(hidden, ffn),), FUSED_THREADS,
                      (t, residual, norm_w, eps, wgu, wd, act, hidden, ffn, bar), "ippfpppiip", self.stream, 0, self.pdl)

    def omlp_lean(self, residual, norm_w, eps, wgu, wd, act, hidden, ffn, t, bar, attn, wo, k_o):
        """residual[t] += O(attn) (attn bf16 [t, k_o], combined), then mlp_lean's work, one launch (two grid
        barriers on bar; lean_mlp.cu omlp_lean_t<t>)."""
        if not 1 <= t <= GEMV_MAX_T or k_o % 32 or k_o > FUSED_MAX_K:
            raise ValueError(f"omlp_lean takes 1..{GEMV_MAX_T} rows and K_o % 32 == 0 <= {FUSED_MAX_K}, got {t}, {k_o}")
        driver.launch(self.lean_f[("omlp", lean_tm(t))], (mlp_grid(hidden, ffn),), FUSED_THREADS,
                      (t, residual, norm_w, eps, wgu, wd, act, hidden, ffn, bar, attn, wo, k_o), "ippfpppiipppi",
                      self.stream, 0, self.pdl)

    def _t_step(self, n_tokens: int) -> int:
        return n_tokens if self.lean_prefetch else 1 << 20   # (huge: no K/V row is staged before the wait)

    def omlpq_lean(self, residual, norm_w, eps, wgu, wd, act, hidden, ffn, t, bar, attn, wo, k_o, nxt: QkvNext):
        """omlp_lean, then a grid barrier and the next layer's RMSNorm + QKV + RoPE + K/V write (``nxt``),
        t <= OMLPQ_MAX_T rows, one launch (lean_mlp.cu omlpq_lean_t<t>)."""
        if not 1 <= t <= OMLPQ_MAX_T or k_o % 32 or k_o > FUSED_MAX_K:
            raise ValueError(f"omlpq_lean takes 1..{OMLPQ_MAX_T} rows and K_o % 32 == 0 <= {FUSED_MAX_K}, got {t}, {k_o}")
        driver.launch(self.lean_f[("omlpq", lean_tm(t))], (mlp_grid(hidden, ffn),), FUSED_THREADS,
                      (t, residual, norm_w, eps, wgu, wd, act, hidden, ffn, bar, attn, wo, k_o, nxt),
                      "ippfpppiipppis", self.stream, 0, self.pdl)

    def lean_attention_merged(self, q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride,
                              page_size, scale, n_tokens, n_kv, nsplit, out, part_o, part_ml, counters):
        """lean_attention, and the splits merged into bf16 out by each group's last split (lean.cu)."""
        if not 1 <= nsplit <= MAX_SPLITS_BUF:
            raise ValueError(f"lean attention takes 1..{MAX_SPLITS_BUF} splits, got {nsplit}")
        driver.launch(self.lean_f["attention_merged"], (n_tokens, n_kv, nsplit), 128,
                      (q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size,
                       scale, n_kv, nsplit, out, part_o, part_ml, counters, self._t_step(n_tokens)),
                      "pppppppiifiippppi", self.stream, 0, self.pdl)

    def qkv_lean(self, residual, norm_w, eps, w, n, k, t, positions, rope, slots, q_out, k_cache, v_cache,
                 head_dim, q_size, kv_size):
        """RMSNorm + QKV + RoPE + K/V write for t <= 8 rows (lean.cu qkv_lean_t<t>)."""
        if not 1 <= t <= GEMV_MAX_T or k > FUSED_MAX_K or k % 8 or n % 2:
            raise ValueError(f"qkv_lean takes 1..{GEMV_MAX_T} rows and K <= {FUSED_MAX_K}, got t={t} K={k}")
        driver.launch(self.lean_f[("qkv", lean_tm(t))], (-(-n // (2 * LEAN_QKV_WARPS)),), 32 * LEAN_QKV_WARPS,
                      (t, residual, norm_w, eps, w, n, k, positions, rope, slots, q_out, k_cache, v_cache, head_dim,
                       q_size, kv_size), "ippfpiippppppiii", self.stream, 0, self.pdl)

    def lean_attention(self, q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride,
                       page_size, scale, n_tokens, n_kv, nsplit, out, part_o, part_ml):
        """paged attention with LEAN_CHUNK-key chunks; with nsplit > 1 only the partials (o_lean merges)."""
        if not 1 <= nsplit <= LEAN_MAX_SPLITS:
            raise ValueError(f"lean attention takes 1..{LEAN_MAX_SPLITS} splits, got {nsplit}")
        driver.launch(self.lean_f["attention"], (n_tokens, n_kv, nsplit), 128,
                      (q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size,
                       scale, n_kv, nsplit, out, part_o, part_ml, self._t_step(n_tokens)), "pppppppiifiipppi",
                      self.stream, 0, self.pdl)

    def o_lean(self, attn, part_o, part_ml, nsplit, n_heads, wo, residual, hidden, t):
        """residual[t] += O(the split combine of the attention partials), t <= 8 rows (lean.cu o_lean_t<t>)."""
        if not 1 <= t <= GEMV_MAX_T or not 1 <= nsplit <= LEAN_MAX_SPLITS or n_heads > 16:
            raise ValueError(f"o_lean takes 1..{GEMV_MAX_T} rows, 1..{LEAN_MAX_SPLITS} splits, got {t}, {nsplit}")
        driver.launch(self.lean_f[("o", lean_tm(t))], (-(-hidden // (2 * LEAN_O_WARPS)),), 32 * LEAN_O_WARPS,
                      (t, attn, part_o, part_ml, nsplit, n_heads, wo, residual, hidden), "ipppiippi", self.stream, 0,
                      self.pdl)

    @property
    def stream(self):
        return self.device.stream

    def _go(self, name, grid, block, args, sig, smem=0):
        driver.launch(self.f[name], grid, block, args, sig, self.stream, smem, self.pdl)

    def embedding(self, ids, table, out, n_tokens, hidden):
        self._go("embedding_gather", (n_tokens,), 192, (ids, table, out, hidden), "pppi")

    def add_rmsnorm(self, x, residual, weight, out, rows, n_rows, hidden, eps, per_warp: bool | None = None):
        """add_rmsnorm_warp (a warp a row) where the shape fits it (``per_warp`` None), else add_rmsnorm (a block
        a row); ``per_warp`` forces one (the checks run both)."""
        if per_warp is None:
            per_warp = hidden % 2 == 0 and hidden <= 64 * NORM_MAX_PAIRS
        if per_warp:
            self._go("add_rmsnorm_warp", (-(-n_rows // NORM_WARPS),), 32 * NORM_WARPS,
                     (x, residual, weight, out, rows, n_rows, hidden, eps), "pppppiif")
            return
        self._go("add_rmsnorm", (n_rows,), 192, (x, residual, weight, out, rows, hidden, eps), "pppppif")

    def rope(self, x, positions, table, n_tokens, n_heads, head_dim):
        total = n_tokens * n_heads * head_dim // 2
        self._go("rope_inplace", (-(-total // 256),), 256, (x, positions, table, n_tokens, n_heads, head_dim), "pppiii")

    def kv_write(self, k, v, slots, k_cache, v_cache, n_tokens, kv_width):
        total = n_tokens * kv_width // 2
        self._go("kv_write", (-(-total // 256),), 256, (k, v, slots, k_cache, v_cache, n_tokens, kv_width), "pppppii")

    def swiglu(self, gate_up, out, n_tokens, ffn):
        self._go("swiglu", (-(-n_tokens * ffn // 256),), 256, (gate_up, out, n_tokens, ffn), "ppii")

    def gemv(self, x, x_is_f32, x_rows, norm_w, eps, w, n, k, t, e: Epi):
        if not 1 <= t <= GEMV_MAX_T:
            raise ValueError(f"gemv takes 1..{GEMV_MAX_T} rows, got {t}")
        self._go("linear_gemv", (-(-n // GEMV_ROWS_PER_BLOCK),), 128,
                 (x, int(x_is_f32), x_rows, norm_w, eps, w, n, k, t, e), "pippfpiiis", smem=t * k * 4)

    def mma(self, a, m, w, n, k, e: Epi, tile: int | None = None):
        """64x64 tiles, or 32x32 when 64x64 tiles would leave most of the GPU idle (or ``tile``); with
        linear_wgmma loaded (``self.wgmma``) and no tile asked for, the shapes it wants go there."""
        if tile is None and self.wgmma is not None and self.wgmma.wants(m, n, k, e):
            self.wgmma.launch(a, m, w, n, k, e, checked=True)
            return
        if e.norm_out or e.ss_in:
            raise ValueError("a folded RMSNorm (norm_out / ss_in) runs on linear_wgmma only")
        if tile is None:
            tile = MMA_TILE if (n // MMA_TILE) * -(-m // MMA_TILE) >= self.device.sm_count else 32
        name = "linear_mma" if tile == MMA_TILE else "linear_mma_32"
        self._go(name, (n // tile, -(-m // tile)), 128, (a, m, w, n, k, e), "pipiis")

    def linear(self, a_bf16, m, w, n, k, e: Epi):
        """bf16 activations [m, k] @ W[n, k]^T, the path chosen by m."""
        if m <= GEMV_MAX_T:
            self.gemv(a_bf16, 0, 0, 0, 0.0, w, n, k, m, e)
        else:
            self.mma(a_bf16, m, w, n, k, e)

    def attention(self, q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride,
                  page_size, scale, n_tokens, n_kv, n_heads, head_dim, nsplit, out, part_o, part_ml):
        self._go("paged_attention", (n_tokens, n_kv, nsplit), 128,
                 (q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size,
                  scale, n_kv, nsplit, out, part_o, part_ml), "pppppppiifiippp")
        if nsplit > 1:
            self._go("attention_combine", (n_tokens, n_heads), head_dim,
                     (part_o, part_ml, n_heads, nsplit, out), "ppiip")

    def decode_attention(self, variant, q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables,
                         bt_stride, page_size, scale, n_tokens, n_kv, n_heads, head_dim, nsplit, out, part_o, part_ml):
        """paged_attention's result (same arguments, same split partials, attention_combine after a split) from
        decode_attention.cu's ``variant`` (a kernels.cuda.decode_plan.Variant): grid (n_kv, tokens, splits)."""
        if not 1 <= n_tokens <= 65535 or not 1 <= nsplit <= decode_plan.MAX_SPLITS:
            raise ValueError(f"decode_attention takes 1..65535 tokens, 1..{decode_plan.MAX_SPLITS} splits")
        self._go(variant.kernel, (n_kv, n_tokens, nsplit), variant.threads,
                 (q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size,
                  scale, n_kv, nsplit, out, part_o, part_ml), "pppppppiifiippp", smem=variant.smem_bytes)
        if nsplit > 1:
            self._go("attention_combine", (n_tokens, n_heads), head_dim,
                     (part_o, part_ml, n_heads, nsplit, out), "ppiip")

    def flash_attention(self, q, k_cache, v_cache, tiles, n_tiles, bq, ks, tok_seq, positions, context_lens,
                        block_tables, bt_stride, page_size, scale, n_kv, out):
        """Causal paged attention of every token in ``tiles`` (int32 [n_tiles, 2] on the device, made by
        kernels.cuda.flash_plan.tiles with ``bq`` rows a tile; ``ks`` key groups a block) on tensor cores
        (flash_attention.cu)."""
        if not 1 <= n_tiles <= 65535:
            raise ValueError(f"flash_attention takes 1..65535 tiles, got {n_tiles}")
        st = self.flash_stages
        self._go(flash_kernel(bq, ks, st), (n_kv, n_tiles), 32 * self.att_g * bq // 16 * ks,
                 (q, k_cache, v_cache, tiles, tok_seq, positions, context_lens, block_tables, bt_stride, page_size,
                  scale, n_kv, out), "pppppppp" + "iifi" + "p", smem=ks * st * FLASH_SMEM_PER_STAGE)

    def token_mask(self, logits, rows, bits, bit_row, out, vocab, words, n_rows):
        self._go("token_mask_rows", (-(-vocab // 256), n_rows), 256,
                 (logits, rows, bits, bit_row, out, vocab, words), "pppppii")

    def sample(self, logits, rows, vocab, temperature, top_p, top_k, seed, step, min_p, adj_row, scratch, out,
               n_rows, mask_bits=0, mask_row=0, words=0):
        # mask_bits / mask_row / words: the rows' token masks read as sample_rows loads the logits (0: none)
        args = (logits, rows, vocab, temperature, top_p, top_k, seed, step, min_p, adj_row, scratch, out,
                mask_bits, mask_row, words)
        if self.sample_split and n_rows <= self.sample_split_rows and sample_split.fits(vocab):
            self._go("sample_rows_split", (n_rows * sample_split.SPLIT_C,), sample_split.SPLIT_THREADS, args,
                     "ppi" + "p" * 9 + "ppi", smem=sample_split.smem(vocab))
            return
        self._go("sample_rows", (n_rows,), 1024, args, "ppi" + "p" * 9 + "ppi")

    def adjust(self, logits, rows, src_row, vocab, offsets, token, count, bias, presence, frequency, pending,
               tokens, scratch, n_adjusted):
        self._go("adjust_rows", (n_adjusted,), 1024,
                 (logits, rows, src_row, vocab, offsets, token, count, bias, presence, frequency, pending, tokens,
                  scratch), "pppi" + "p" * 9)
