"""CudaBackend: the numpy backend's interface (forward / sample / logprobs) on one NVIDIA GPU.

Weights bf16 on the device ([out, in] rows; gate/up interleaved for the fused SwiGLU), the paged KV
pool bf16 on the device, activations float32 in the residual stream. A pure-decode step (one token
per sequence, every row sampled) is padded to a batch bucket and replayed from a CUDA graph captured
once per (bucket, attention splits, block-table width); anything else (prefill chunks, mixed steps) is
launched directly, or from a graph once its exact shape repeats (step_graphs). ``forward`` returns
``DeviceLogits``; ``sample`` runs on the GPU.
"""
from __future__ import annotations

import os

import numpy as np

from kernels import sampler
from kernels.cuda import decode_plan, driver, flash_plan, fused_policy, lean_plan, launchers as L, norm_fusion, wgmma_plan
from kernels.cuda.adjust_buffers import AdjustBuffers
from kernels.cuda.launchers import Kernels
from kernels.cuda.logits import DeviceLogits
from kernels.cuda.sample_args import sample_args
from kernels.cuda.step_graphs import StepGraphs, step_graphs_enabled
from kernels.cuda.step_plan import step_plan
from kernels.cuda.token_mask import FUSED as FUSED_MASK, DeviceTokenMask, MaskedLogits
from kernels.cuda.twins import interleave_gate_up, to_bf16
from kernels.ops_rope import rope_cos_sin
from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MAX_SPLITS = 16


def _pow2ceil(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


class CudaBackend:
    name = "cuda"
    # the default batch bound (kernels.pool_size): decode graphs exist up to BUCKETS[-1] (512), but
    # 256 is the widest batch the kernel bench measured and the sampling rows preallocated
    # (row_capacity); --max-batch 512 works and grows those buffers once (dropping the graphs)
    largest_bucket = 256

    def __init__(self, bundle, num_pages: int, page_size: int = 16, token_capacity: int = 4096,
                 row_capacity: int = 256):
        cfg = self.config = bundle.config
        if num_pages <= 0 or page_size <= 0:
            raise ValueError(f"num_pages and page_size must be positive, got {num_pages}, {page_size}")
        self._num_pages, self._page_size = num_pages, page_size
        self.dev = driver.Device(0)
        self.k = Kernels(self.dev, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim)
        self.scale = 1.0 / float(cfg.head_dim) ** 0.5
        self.qkv_n = cfg.q_size + 2 * cfg.kv_size
        self._bufs: list[driver.Buffer] = []
        w = bundle.weights
        self.embed = self._upload(to_bf16(w["token_embd.weight"]))
        self.out_norm = self._upload(w["output_norm.weight"])
        self.layers = []
        for i in range(cfg.n_layers):
            p = f"blk.{i}."
            self.layers.append({
                "attn_norm": self._upload(w[p + "attn_norm.weight"]),
                "ffn_norm": self._upload(w[p + "ffn_norm.weight"]),
                "wqkv": self._upload(to_bf16(w[p + "attn_qkv.weight_t"].T)),
                "wo": self._upload(to_bf16(w[p + "attn_output.weight_t"].T)),
                "wgu": self._upload(to_bf16(interleave_gate_up(w[p + "ffn_gate_up.weight_t"].T))),
                "wdown": self._upload(to_bf16(w[p + "ffn_down.weight_t"].T)),
            })
        cos, sin = rope_cos_sin(np.arange(cfg.context_length), cfg.head_dim, cfg.rope_base)
        self.rope = self._upload(np.stack([cos, sin], axis=-1))
        slots = num_pages * page_size
        self.layer_kv_bytes = slots * cfg.kv_size * 2
        self.k_cache = self._alloc(self.layer_kv_bytes * cfg.n_layers)
        self.v_cache = self._alloc(self.layer_kv_bytes * cfg.n_layers)
        self.max_pages = -(-cfg.context_length // page_size)
        self.generation = 0
        self.graphs: dict[tuple, driver.Graph] = {}
        self.last_graph: driver.Graph | None = None
        self.staging = None   # pinned staging of host->device copies (kernels.cuda.overlap), when overlapped
        # fused T <= 8 kernels (fused.cu, attn_fused.cu); AOTX_FUSED=0 restores the older plan (fused_policy)
        self.fused = fused_policy.fused_enabled(os.environ) and self.k.fused_ok(cfg.hidden, cfg.ffn, cfg.vocab_size)
        self.fused_attn_min_t = fused_policy.fused_attn_min_t(os.environ)   # attn_o_fused from this T on
        lean_plan.configure(self, os.environ)   # self.lean: the lean kernels at T <= 8 (AOTX_LEAN)
        self.flash = flash_plan.flash_enabled(os.environ)   # prefill chunks on flash_prefill (flash_plan)
        self.fused_norm = norm_fusion.fused_norm_enabled(os.environ)   # norms folded into the GEMMs (norm_fusion)
        self.decode_mma = decode_plan.variant_from_env(os.environ)   # paged attention on decode_attention.cu
        if wgmma_plan.wgmma_enabled(os.environ):   # projections of >= 64 rows on linear_wgmma (wgmma_plan)
            self.k.wgmma = wgmma_plan.Wgmma(self.k, tma=wgmma_plan.wgmma_mode(os.environ) == "tma")
        # [0] mlp_fused's grid barrier, [4] lm_head_argmax's counter, [8:72] its keys, [72] attn_o_fused's
        # grid barrier, [76:] its per-(token, KV head) counters; all zero, and every kernel leaves them so
        self.sync = self._alloc(76 + 4 * L.GEMV_MAX_T * cfg.n_kv_heads)
        driver.memset0(self.sync, 76 + 4 * L.GEMV_MAX_T * cfg.n_kv_heads, self.dev.stream)
        self._greedy_gen = None        # the generation whose greedy ids lm_head_argmax left in sample_out
        self.token_mask = None  # kernels.cuda.token_mask.DeviceTokenMask, made by the first constrained step
        # a mask whose bits come later (kernels/cuda/mask_gate.py) is copied inside sample_enqueue: fused only
        self.gated_masks = FUSED_MASK
        self._acts: list[driver.Buffer] = []
        self.step_graphs = StepGraphs(self, step_graphs_enabled(os.environ))
        self.adjust_bufs = AdjustBuffers(self)
        self._reserve(token_capacity, row_capacity)
        self.dev.synchronize()

    # -- memory -------------------------------------------------------------
    def _alloc(self, nbytes: int, acts: bool = False) -> int:
        b = driver.Buffer(nbytes)
        (self._acts if acts else self._bufs).append(b)
        return b.ptr

    def _upload(self, arr: np.ndarray) -> int:
        arr = np.ascontiguousarray(arr)
        ptr = self._alloc(arr.nbytes)
        driver.htod(ptr, arr, self.dev.stream)
        self.dev.synchronize()
        return ptr

    def _reserve(self, tokens: int, rows: int) -> None:
        """(Re)allocate activations for ``tokens`` tokens and ``rows`` logits rows; drops graphs."""
        self.dev.synchronize()
        for b in self._acts:
            b.free()
        self._acts, self.graphs = [], {}
        self.step_graphs.clear()
        cfg = self.config
        self.t_cap, self.r_cap = tokens, rows
        split_rows = min(tokens, BUCKETS[-1])
        a = lambda n: self._alloc(n, acts=True)  # noqa: E731
        self.residual = a(tokens * cfg.hidden * 4)
        self.h = a(tokens * cfg.hidden * 2)
        self.ss = a(tokens * -(-cfg.hidden // 64) * 4)   # the folded norms' row sums (norm_fusion)
        self.q = a(tokens * cfg.q_size * 4)
        self.attn = a(tokens * cfg.q_size * 2)
        self.act = a(tokens * cfg.ffn * 2)
        self.part_o = a(split_rows * cfg.n_heads * MAX_SPLITS * cfg.head_dim * 4)
        self.part_ml = a(split_rows * cfg.n_heads * MAX_SPLITS * 2 * 4)
        self.hf = a(rows * cfg.hidden * 2)
        self.logits = a(rows * cfg.vocab_size * 4)
        self.ints_cap = tokens * 7 + rows + tokens * self.max_pages + 64   # 7: 5 arrays + flash tiles
        self.ints = a(self.ints_cap * 4)
        self.sample_buf = a(rows * 40 + 64)
        self.sample_out = a(rows * 4 + 16)

    def _htod(self, dst: int, host: np.ndarray) -> None:
        if self.staging is None:
            driver.htod(dst, host, self.dev.stream)
        else:
            self.staging.htod(dst, host)

    def step_launcher(self, force: bool = False):
        """The overlapped launcher (pinned staging, ids fed on the device, async read-back) when
        asked (``force``) and by default; None (the classic loop) with AOTX_CUDA_OVERLAP=0. On by default
        since the H200 run of 2026-12-01 (gpu-check: launcher == classic ids 15/15 steps, usage == tokens
        delivered, engine == classic on 20/21 sampled requests; 1.1-1.5x the classic loop in process).
        aotx.engine.launch asks."""
        if not force and os.environ.get("AOTX_CUDA_OVERLAP", "1") == "0":
            return None
        from kernels.cuda.overlap import CudaStepLauncher
        return CudaStepLauncher(self)

    @property
    def num_pages(self) -> int:
        return self._num_pages

    @property
    def page_size(self) -> int:
        return self._page_size

    # -- forward --------------------------------------------------------------
    def _stage(self, tokens, positions, slots, tok_seq, ctx, rows, tables, width: int, tiles=None) -> dict[str, int]:
        """One int32 upload of every per-step array (the flash tiles last, if any); their device pointers."""
        parts = {"tokens": tokens, "positions": positions, "slots": slots, "tok_seq": tok_seq,
                 "ctx": ctx, "rows": rows}
        bt = np.full((len(ctx), width), -1, dtype=np.int32)
        bt[:, :tables.shape[1]] = tables
        parts["bt"] = bt.ravel()
        if tiles is not None:
            parts["tiles"] = tiles.ravel()
        host = np.concatenate([np.asarray(v, dtype=np.int32).ravel() for v in parts.values()])
        if host.size > self.ints_cap:
            raise ValueError("step arrays exceed the staging buffer")
        self._htod(self.ints, host)
        ptrs, off = {}, 0
        for name, v in parts.items():
            ptrs[name] = self.ints + 4 * off
            off += np.asarray(v).size
        return ptrs

    def _nsplit(self, n_tokens: int, max_len: int) -> int:
        """Attention splits along the sequence: enough blocks to fill the GPU twice over, at most one
        per key chunk (a block walks its chunks serially; a split costs one combine launch)."""
        if n_tokens > BUCKETS[-1]:
            return 1
        if self.fused and lean_plan.mode_for(self.lean, n_tokens):
            return lean_plan.lean_nsplit(n_tokens, max_len, self.config.n_kv_heads, self.dev.sm_count)
        if decode_plan.applies(self.decode_mma, n_tokens):
            v = self.decode_mma
            return decode_plan.nsplit(v, n_tokens, max_len, self.config.n_kv_heads, self.dev.sm_count)
        chunks = -(-max_len // L.ATT_CHUNK)
        want = -(-2 * self.dev.sm_count // (n_tokens * self.config.n_kv_heads))
        return max(1, min(_pow2ceil(want), _pow2ceil(chunks), MAX_SPLITS))

    def _record(self, t: int, r: int, p: dict[str, int], bt_stride: int, nsplit: int) -> None:
        """Launch one whole step on the stream (also what a graph captures). Small steps (the gemv
        path: ~150 short, dependent kernels) use programmatic dependent launch, measured 16% faster
        at batch 1 on the H200; large ones don't (their big grids then compete with waiting
        successors: 13% slower at batch 256)."""
        self.k.pdl = t <= L.GEMV_MAX_T
        try:
            for _, launch in self.plan(t, r, p, bt_stride, nsplit):
                launch()
        finally:
            self.k.pdl = False

    def plan(self, t: int, r: int, p: dict[str, int], bt_stride: int, nsplit: int) -> list[tuple[str, object]]:
        """The step as (op name, launch) pairs in order: t tokens, r logits rows, staged arrays p
        (kernels.cuda.step_plan)."""
        return step_plan(self, t, r, p, bt_stride, nsplit)

    def forward(self, batch: StepBatch, patch=None) -> DeviceLogits:
        """float32 logits [len(batch.logits_rows), vocab], left on the GPU; writes the batch's K/V.
        ``patch(ptrs)``, if given, is called once the step's arrays are staged (before any kernel of
        the step is enqueued): the overlapped launcher copies the previous step's ids into them."""
        self.dev.make_current()
        self.generation += 1
        t, s, r = batch.num_tokens, batch.num_seqs, len(batch.logits_rows)
        if t > self.t_cap or r > self.r_cap:
            self._reserve(max(t, self.t_cap), max(r, self.r_cap))
        qs = np.asarray(batch.query_start)
        rows = np.asarray(batch.logits_rows)
        decode = (t == s and s <= BUCKETS[-1] and r == s and np.array_equal(qs, np.arange(s + 1))
                  and np.array_equal(rows, np.arange(s)))
        if decode:
            return self._decode(batch, patch)
        if t == 0:  # nothing to run
            return DeviceLogits(self, self.logits, 0, self.config.vocab_size, self.generation)
        p, width, nsplit = self.stage(batch, patch)
        self.step_graphs.run(t, r, p, width, nsplit)
        self._greedy_gen = self.generation if self.fused and r <= L.GEMV_MAX_T else None
        return DeviceLogits(self, self.logits, r, self.config.vocab_size, self.generation)

    def stage(self, batch: StepBatch, patch=None) -> tuple[dict[str, int], int, int]:
        """Stage a step launched directly (not a decode graph): the staged arrays p (with flash
        tiles when flash_plan picks flash_prefill), the block-table width and the attention splits."""
        qs, tables = np.asarray(batch.query_start), np.asarray(batch.block_tables)
        tok_seq = np.repeat(np.arange(batch.num_seqs, dtype=np.int32), np.diff(qs))
        width, tiles = max(tables.shape[1], 1), None
        if self.flash and flash_plan.wants_flash(qs):
            bq, ks = flash_plan.variant(qs, self.config.n_kv_heads, self.dev.sm_count)
            tiles = flash_plan.tiles(qs, batch.positions, batch.context_lens, bq)
        p = self._stage(batch.token_ids, batch.positions, batch.slot_mapping, tok_seq, batch.context_lens,
                        batch.logits_rows, tables, width, tiles)
        if tiles is not None:
            p["n_tiles"], p["bq"], p["ks"] = len(tiles), bq, ks
        if patch is not None:
            patch(p)
        return p, width, self._nsplit(batch.num_tokens, int(np.max(batch.context_lens)))

    def _decode(self, batch: StepBatch, patch=None) -> DeviceLogits:
        s = batch.num_seqs
        b = next(x for x in BUCKETS if x >= s)
        tables = np.asarray(batch.block_tables)
        width = min(_pow2ceil(max(tables.shape[1], 8)), _pow2ceil(self.max_pages))
        nsplit = self._nsplit(b, int(np.max(batch.context_lens)))
        pad = b - s

        def padded(a, fill):
            return np.concatenate([np.asarray(a, dtype=np.int32), np.full(pad, fill, dtype=np.int32)])

        ar = np.arange(b, dtype=np.int32)
        p = self._stage(padded(batch.token_ids, 0), padded(batch.positions, 0), padded(batch.slot_mapping, -1),
                        ar, padded(batch.context_lens, 0), ar,
                        np.concatenate([tables, np.full((pad, tables.shape[1]), -1, np.int32)]), width)
        if patch is not None:
            patch(p)
        key = (b, nsplit, width, self.fused, b >= self.fused_attn_min_t, self.lean, self.fused_norm, self.decode_mma)
        graph = self.graphs.get(key)
        if graph is None:
            graph = self.graphs[key] = driver.Graph(self.dev.stream, lambda: self._record(b, b, p, width, nsplit))
        self.last_graph = graph
        graph.launch(self.dev.stream)
        self._greedy_gen = self.generation if self.fused and b <= L.GEMV_MAX_T else None
        return DeviceLogits(self, self.logits, s, self.config.vocab_size, self.generation)

    def copy_logits(self, ptr: int, n_rows: int) -> np.ndarray:
        self.dev.make_current()
        host = np.empty((n_rows, self.config.vocab_size), dtype=np.float32)
        return driver.dtoh(host, ptr, self.dev.stream)

    # -- sampling -----------------------------------------------------------
    def sample(self, logits, rows: SamplingRows) -> np.ndarray:
        """int32 [R] per kernels/sampler.py, computed on the GPU; only the ids are copied back."""
        n = self.sample_enqueue(logits, rows)
        if n == 0:
            return np.empty(0, dtype=np.int32)
        return driver.dtoh(np.empty(n, dtype=np.int32), self.sample_out, self.dev.stream)

    def sample_enqueue(self, logits, rows: SamplingRows) -> int:
        """Enqueue the sampling kernel; the ids land in ``sample_out`` (int32 [n]); returns n.
        ``logits`` may be MaskedLogits (masked_logits, fused): the mask is read inside sample_rows."""
        self.dev.make_current()
        mask = None
        if isinstance(logits, MaskedLogits):
            logits, mask = logits.logits, logits.mask
        host = not isinstance(logits, DeviceLogits)
        logits = self._device_logits(logits)
        logits.check_live()
        ptr, idx = logits.ptr, logits.rows
        n = len(idx)
        if n == 0:
            return 0
        # (not for a masked copy of the logits — a constrained step — whose argmax may differ)
        # (nor for rows whose logits are adjusted first: penalties, logit_bias)
        if (mask is None and not host and logits.generation == self._greedy_gen
                and logits.ptr == self.logits and rows.adjust is None and not np.any(np.asarray(rows.temperature) > 0)
                and np.array_equal(idx, np.arange(n))):
            return n   # all greedy: lm_head_argmax already wrote these rows' ids into sample_out
        self._greedy_gen = None   # sample_rows overwrites sample_out
        if n > self.r_cap:
            raise ValueError(f"{n} rows exceed the sampling capacity {self.r_cap}")
        pad8, args = sample_args(idx, rows)
        scratch = 0
        self._htod(self.sample_buf, args)
        base = self.sample_buf
        if rows.adjust is not None and len(rows.adjust.rows):
            if host and (rows.adjust.pending >= 0).any():
                raise ValueError("pending output tokens need the step's tokens on the device (sample its DeviceLogits)")
            scratch = self.adjust_bufs.enqueue(ptr, base, rows.adjust)
        masking = (0, 0, 0) if mask is None else self.token_mask.sample_args(n, mask)
        self.k.sample(ptr, base, self.config.vocab_size, base + 4 * pad8, base + 8 * pad8, base + 12 * pad8,
                      base + 24 * pad8, base + 24 * pad8 + 8 * n, base + 16 * pad8, base + 20 * pad8, scratch,
                      self.sample_out, n, *masking)
        return n

    def _device_logits(self, logits) -> DeviceLogits:
        """`logits` as DeviceLogits: host logits (float32 [R, V]) uploaded into the logits buffer."""
        if isinstance(logits, DeviceLogits):
            return logits
        arr = np.ascontiguousarray(logits, dtype=np.float32)
        if arr.shape[0] > self.r_cap:
            self._reserve(self.t_cap, arr.shape[0])
        driver.htod(self.logits, arr, self.dev.stream)
        self.generation += 1
        return DeviceLogits(self, self.logits, arr.shape[0], self.config.vocab_size, self.generation)

    def masked_logits(self, logits, mask):
        """The rows about to be sampled with the constrained ones masked (kernels/cuda/token_mask.py):
        MaskedLogits that sample_rows masks as it reads them, or (AOTX_FUSED_MASK=0) a masked scratch
        copy on the device; host logits are uploaded first."""
        logits = self._device_logits(logits)
        if self.token_mask is None:
            self.token_mask = DeviceTokenMask(self)
        return self.token_mask.fused(logits, mask) if FUSED_MASK else self.token_mask.masked(logits, mask)

    def logprobs(self, logits, chosen: np.ndarray, k: int):
        """Host-side (only requests that ask for logprobs pay the copy of their rows)."""
        return sampler.logprobs(np.asarray(logits, dtype=np.float32), chosen, k)
