"""Every CUDA kernel against its numpy twin on the model's shapes (SmolLM2-135M), random inputs.

Error measure: ||out - ref|| / ||ref|| with the reference computed in float32 numpy on the SAME
bf16-rounded inputs the device sees. Tolerances (stated, per output dtype): float32 outputs 1e-3
(accumulation order only), bf16 outputs 8e-3 (one bf16 rounding, 2^-8 relative), exact where the
kernel only moves data. Sampling must pick exactly the numpy sampler's token.
"""
from __future__ import annotations

import time

import numpy as np

from kernels import sampler
from kernels.cuda import driver, launchers as L
from kernels.cuda.twins import from_bf16, interleave_gate_up, round_bf16, to_bf16
from kernels.ops_attention import kv_write, paged_attention
from kernels.ops_mlp import swiglu
from kernels.ops_norm import add_rmsnorm, rmsnorm
from kernels.ops_rope import apply_rope, rope_cos_sin
from kernels.sampling_rows import SamplingRows

H, HQ, KVW, F, V, D, NH, NKV = 576, 576, 192, 1536, 49152, 64, 9, 3
TOL_F32, TOL_BF16 = 1e-3, 8e-3


class Ctx:
    def __init__(self):
        self.dev = driver.Device(0)
        self.k = L.Kernels(self.dev, NH, NKV, D)
        self.rng = np.random.default_rng(1234)
        self.bufs = []
        self.results = []
        self.tag = ""      # a prefix of the names recorded (ops/gpu/sampling_check.py: which sampling kernel)

    def up(self, a):
        a = np.ascontiguousarray(a)
        b = driver.Buffer(a.nbytes)
        self.bufs.append(b)
        driver.htod(b.ptr, a, self.dev.stream)
        return b.ptr

    def zeros(self, nbytes, poison=True):
        b = driver.Buffer(nbytes)
        self.bufs.append(b)
        host = np.full(nbytes, 0xFF if poison else 0, dtype=np.uint8)   # poison: NaN patterns
        driver.htod(b.ptr, host, self.dev.stream)
        return b.ptr

    def down(self, ptr, shape, dtype):
        out = np.empty(shape, dtype=dtype)
        return driver.dtoh(out, ptr, self.dev.stream)

    def record(self, name, err, tol, extra=""):
        name = self.tag + name
        ok = bool(np.isfinite(err) and err <= tol)
        self.results.append((name, float(err), tol, ok, extra))
        print(f"{'PASS' if ok else 'FAIL'} {name:<44} err={err:.2e} tol={tol:.0e} {extra}", flush=True)

    def summary(self, what: str, t0: float) -> int:
        """Print the tally of the checks recorded; the exit code (1 if any failed)."""
        failed = [r for r in self.results if not r[3]]
        print(f"{len(self.results) - len(failed)}/{len(self.results)} {what} checks passed in {time.time() - t0:.0f} s",
              flush=True)
        return 1 if failed else 0

    def free(self):
        for b in self.bufs:
            b.free()
        self.bufs = []


def rel(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def check_small_ops(c: Ctx):
    for t in (1, 7, 300):
        table = to_bf16(c.rng.standard_normal((V, H)).astype(np.float32) * 0.05)
        ids = c.rng.integers(0, V, t).astype(np.int32)
        out = c.zeros(t * H * 4)
        c.k.embedding(c.up(ids), c.up(table), out, t, H)
        c.record(f"embedding_gather T={t}", rel(c.down(out, (t, H), np.float32), from_bf16(table)[ids]), 0.0)

        x = c.rng.standard_normal((t, H)).astype(np.float32)
        res = c.rng.standard_normal((t, H)).astype(np.float32)
        w = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
        rows = c.rng.permutation(t).astype(np.int32)
        r_ref, h_ref = add_rmsnorm(x, res, w, 1e-5)
        for kern, per_warp in (("add_rmsnorm_warp", True), ("add_rmsnorm", False)):   # the model's, the fallback
            res_d, out = c.up(res), c.zeros(t * H * 2)
            c.k.add_rmsnorm(c.up(x), res_d, c.up(w), out, c.up(rows), t, H, 1e-5, per_warp)
            c.record(f"{kern} (gather) T={t} residual", rel(c.down(res_d, (t, H), np.float32), r_ref), TOL_F32)
            c.record(f"{kern} (gather) T={t} out", rel(from_bf16(c.down(out, (t, H), np.uint16)), h_ref[rows]),
                     TOL_BF16)
            out = c.zeros(t * H * 2)   # the step's use: no add, no gather (residual unchanged)
            c.k.add_rmsnorm(0, res_d, c.up(w), out, 0, t, H, 1e-5, per_warp)
            c.record(f"{kern} T={t} out", rel(from_bf16(c.down(out, (t, H), np.uint16)), rmsnorm(r_ref, w, 1e-5)),
                     TOL_BF16)

        pos = c.rng.integers(0, 8192, t).astype(np.int32)
        cos, sin = rope_cos_sin(np.arange(8192), D, 100000.0)
        table_cs = np.stack([cos, sin], -1)
        q = c.rng.standard_normal((t, NH, D)).astype(np.float32)
        qd = c.up(q)
        c.k.rope(qd, c.up(pos), c.up(table_cs), t, NH, D)
        c.record(f"rope_inplace T={t}", rel(c.down(qd, (t, NH, D), np.float32), apply_rope(q, cos[pos], sin[pos])), 1e-6)

        slots_n = 4096
        kk = c.rng.standard_normal((t, KVW)).astype(np.float32)
        vv = c.rng.standard_normal((t, KVW)).astype(np.float32)
        slots = c.rng.choice(slots_n, t, replace=False).astype(np.int32)
        slots[::5] = -1
        kc, vc = c.zeros(slots_n * KVW * 2, poison=False), c.zeros(slots_n * KVW * 2, poison=False)
        c.k.kv_write(c.up(kk), c.up(vv), c.up(slots), kc, vc, t, KVW)
        rk, rv = np.zeros((slots_n, NKV, D), np.float32), np.zeros((slots_n, NKV, D), np.float32)
        kv_write(rk, rv, round_bf16(kk).reshape(t, NKV, D), round_bf16(vv).reshape(t, NKV, D), slots)
        got_k = from_bf16(c.down(kc, (slots_n, NKV, D), np.uint16))
        got_v = from_bf16(c.down(vc, (slots_n, NKV, D), np.uint16))
        c.record(f"kv_write T={t}", max(rel(got_k, rk), rel(got_v, rv)), 0.0)

        gu = c.rng.standard_normal((t, 2 * F)).astype(np.float32) * 3
        out = c.zeros(t * F * 2)
        c.k.swiglu(c.up(gu), out, t, F)
        c.record(f"swiglu T={t}", rel(from_bf16(c.down(out, (t, F), np.uint16)), swiglu(gu)), TOL_BF16)
        c.free()


def check_linear(c: Ctx):
    cos, sin = rope_cos_sin(np.arange(8192), D, 100000.0)
    rope_d = c.up(np.stack([cos, sin], -1))
    for n, k, name in ((960, H, "qkv"), (H, HQ, "o"), (2 * F, H, "gate_up"), (H, F, "down"), (V, H, "lm_head")):
        w = c.rng.standard_normal((n, k)).astype(np.float32) / np.sqrt(k)
        wb = to_bf16(w)
        wf = from_bf16(wb)
        wd = c.up(wb)
        for t in (1, 4, 8, 16, 100, 256):
            x = c.rng.standard_normal((t, k)).astype(np.float32)
            xb = to_bf16(x)
            for tile in ((None,) if t <= L.GEMV_MAX_T else (64, 32)):
                out = c.zeros(t * n * 4)
                e = L.epi(L.EPI_STORE, out_f32=out, ld=n)
                if tile is None:
                    c.k.linear(c.up(xb), t, wd, n, k, e)
                else:
                    c.k.mma(c.up(xb), t, wd, n, k, e, tile=tile)
                path = "gemv" if tile is None else f"mma{tile}"
                c.record(f"linear_{path} {name} T={t}", rel(c.down(out, (t, n), np.float32), from_bf16(xb) @ wf.T),
                         TOL_F32)
        c.free()
        wd = None
        rope_d = c.up(np.stack([cos, sin], -1))
    # fused epilogues and the norm prologue, on both paths
    for t in (1, 8, 64):
        path = "gemv" if t <= L.GEMV_MAX_T else "mma"
        res = c.rng.standard_normal((t, H)).astype(np.float32)
        nw = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
        h = rmsnorm(res, nw, 1e-5)
        hb = round_bf16(h) if path == "mma" else h

        def run(w_dev, n, e):
            if path == "gemv":
                c.k.gemv(c.up(res), 1, 0, c.up(nw), 1e-5, w_dev, n, H, t, e)
            else:
                c.k.mma(c.up(to_bf16(h)), t, w_dev, n, H, e)

        wq = c.rng.standard_normal((960, H)).astype(np.float32) / 24
        wqf = round_bf16(wq)
        pos = c.rng.integers(0, 8000, t).astype(np.int32)
        slots = c.rng.choice(1024, t, replace=False).astype(np.int32)
        q_out, kc, vc = c.zeros(t * HQ * 4), c.zeros(1024 * KVW * 2, False), c.zeros(1024 * KVW * 2, False)
        run(c.up(to_bf16(wq)), 960, L.epi(L.EPI_QKV, out_f32=q_out, positions=c.up(pos), rope=rope_d,
                                          slots=c.up(slots), k_cache=kc, v_cache=vc, head_dim=D, q_size=HQ, kv_size=KVW))
        y = hb @ wqf.T
        q_ref = apply_rope(y[:, :HQ].reshape(t, NH, D), cos[pos], sin[pos]).reshape(t, HQ)
        k_ref = apply_rope(y[:, HQ:HQ + KVW].reshape(t, NKV, D), cos[pos], sin[pos]).reshape(t, KVW)
        c.record(f"linear_{path} EPI_QKV q (rope) T={t}", rel(c.down(q_out, (t, HQ), np.float32), q_ref), TOL_F32)
        got_k = from_bf16(c.down(kc, (1024, KVW), np.uint16))[slots]
        got_v = from_bf16(c.down(vc, (1024, KVW), np.uint16))[slots]
        c.record(f"linear_{path} EPI_QKV k,v -> cache T={t}",
                 max(rel(got_k, k_ref), rel(got_v, y[:, HQ + KVW:])), TOL_BF16)

        wgu = c.rng.standard_normal((2 * F, H)).astype(np.float32) / 24
        act = c.zeros(t * F * 2)
        run(c.up(to_bf16(interleave_gate_up(wgu))), 2 * F, L.epi(L.EPI_SWIGLU, out_bf16=act, ld=F))
        c.record(f"linear_{path} EPI_SWIGLU T={t}",
                 rel(from_bf16(c.down(act, (t, F), np.uint16)), swiglu(hb @ round_bf16(wgu).T)), TOL_BF16)

        wo = c.rng.standard_normal((H, HQ)).astype(np.float32) / 24
        a_in = c.rng.standard_normal((t, HQ)).astype(np.float32)
        r_dev = c.up(res)
        c.k.linear(c.up(to_bf16(a_in)), t, c.up(to_bf16(wo)), H, HQ, L.epi(L.EPI_ADD, out_f32=r_dev, ld=H))
        c.record(f"linear_{path} EPI_ADD (residual) T={t}",
                 rel(c.down(r_dev, (t, H), np.float32), res + round_bf16(a_in) @ round_bf16(wo).T), TOL_F32)
        c.free()
        rope_d = c.up(np.stack([cos, sin], -1))
    c.free()


def check_attention(c: Ctx):
    page, n_pages = 16, 1024
    kc = round_bf16(c.rng.standard_normal((n_pages * page, NKV, D)).astype(np.float32))
    vc = round_bf16(c.rng.standard_normal((n_pages * page, NKV, D)).astype(np.float32))
    cases = [("decode", [1, 17, 128, 129, 300], [1] * 5), ("decode long", [2000, 4000, 33], [1] * 3),
             ("prefill", [40, 300], [40, 300]), ("mixed", [100, 5, 260], [60, 1, 1])]
    scale = 1.0 / 8.0
    for name, lens, nq in cases:
        lens = np.array(lens, np.int32)
        nq = np.array(nq, np.int32)
        width = int(-(-lens.max() // page))
        perm = c.rng.permutation(n_pages)
        tables = np.full((len(lens), width), -1, np.int32)
        used = 0
        for s, ln in enumerate(lens):
            np_ = -(-ln // page)
            tables[s, :np_] = perm[used:used + np_]
            used += np_
        qs = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
        positions = np.concatenate([np.arange(ln - q, ln) for ln, q in zip(lens, nq)]).astype(np.int32)
        tok_seq = np.repeat(np.arange(len(lens)), nq).astype(np.int32)
        t = int(qs[-1])
        q = c.rng.standard_normal((t, NH, D)).astype(np.float32)
        ref = paged_attention(q, kc, vc, positions, qs, lens, tables, page, scale)
        dev_k, dev_v = c.up(to_bf16(kc)), c.up(to_bf16(vc))
        for nsplit in (1, 4) if t <= 512 else (1,):
            out = c.zeros(t * HQ * 2)
            po, pm = c.zeros(t * NH * nsplit * D * 4), c.zeros(t * NH * nsplit * 2 * 4)
            c.k.attention(c.up(q), dev_k, dev_v, c.up(tok_seq), c.up(positions), c.up(lens), c.up(tables), width,
                          page, scale, t, NKV, NH, D, nsplit, out, po, pm)
            got = from_bf16(c.down(out, (t, NH, D), np.uint16))
            c.record(f"paged_attention {name} splits={nsplit}", rel(got, ref), TOL_BF16)
        c.free()


def check_sampling(c: Ctx, logits: np.ndarray | None = None):
    r = 64
    if logits is None:
        base = c.rng.standard_normal((r, V)).astype(np.float32) * 3
        base[3, 100:110] = base[3].max() + 1.0         # ties at the top
        base[5] = np.round(base[5])                      # many ties everywhere
        logits = base
    r = logits.shape[0]
    temps = np.array([0.0, 0.7, 1.0, 1.3][:: 1] * (r // 4 + 1), np.float32)[:r]
    top_p = np.array([1.0, 0.9, 0.5, 0.95, 1.0, 0.3, 0.99, 0.8] * (r // 8 + 1), np.float32)[:r]
    top_k = np.array([0, 0, 50, 1, 5, 0, 1000, 40000] * (r // 8 + 1), np.int32)[:r]
    seed = c.rng.integers(0, 2 ** 63, r).astype(np.uint64)
    step = c.rng.integers(0, 1000, r).astype(np.int64)
    rows = SamplingRows(temps, top_p, top_k, seed, step)
    ref = sampler.sample(logits, rows)
    dl = c.up(np.ascontiguousarray(logits))
    params = [c.up(temps), c.up(top_p), c.up(top_k), c.up(seed), c.up(step.astype(np.uint64)),
              c.up(np.zeros(r, np.float32)), c.up(np.full(r, -1, np.int32)), 0]
    out = c.zeros(r * 4)
    c.k.sample(dl, c.up(np.arange(r, dtype=np.int32)), V, *params, out, r)
    got = c.down(out, (r,), np.int32)
    mism = int((got != ref).sum())
    c.record(f"sample_rows ({r} rows, greedy/temp/top-k/top-p)", float(mism), 0.0, f"mismatched rows={mism}")
    c.free()
    check_sampling_adjusted(c)


def check_sampling_adjusted(c: Ctx):
    """adjust_rows (penalties, logit_bias; the pending token read from device token ids) then
    sample_rows with min_p, against kernels/logit_adjust.py + kernels/sampler.py, exact ids."""
    from kernels.logit_adjust import LogitAdjust

    r = 48
    logits = c.rng.standard_normal((r, V)).astype(np.float32) * 3
    temps = np.array([0.0, 0.7, 1.0, 1.3] * (r // 4), np.float32)
    top_p = np.array([1.0, 0.9, 0.95, 1.0, 0.5, 1.0] * (r // 6), np.float32)
    top_k = np.array([0, 0, 50, 0, 0, 1000] * (r // 6), np.int32)
    min_p = np.array([0.0, 0.05, 0.0, 0.1, 0.0, 0.02, 0.0, 0.0] * (r // 8), np.float32)
    seed = c.rng.integers(0, 2 ** 63, r).astype(np.uint64)
    step = c.rng.integers(0, 1000, r).astype(np.int64)
    tokens = c.rng.integers(0, V, 4 * r).astype(np.int32)          # the step's token ids on the device
    per_row = []
    for i in range(r):
        if i % 3 == 2:
            continue                                              # rows without adjustment in between
        top = np.argsort(-logits[i])[:40]
        entries = {int(t): (int(c.rng.integers(0, 6)), 0.0) for t in top[c.rng.permutation(40)[:20]]}
        for t in c.rng.integers(0, V, 5):
            entries[int(t)] = (entries.get(int(t), (0, 0.0))[0], float(c.rng.uniform(-100, 100)))
        if i % 5 == 0:
            entries[int(top[0])] = (0, -100.0)                    # the greedy token banned
        pending = 4 * i + 1 if i % 2 else -1
        if i % 4 == 1:
            tokens[pending] = int(top[1])                         # pending token among the entries
        per_row.append((i, float(c.rng.uniform(-2, 2)), float(c.rng.uniform(-2, 2)), entries, pending))
    adj = LogitAdjust.build(per_row)
    ref = sampler.sample(logits, SamplingRows(temps, top_p, top_k, seed, step, min_p, adj.resolved(tokens)))
    a = len(adj.rows)
    scratch = c.zeros(a * V * 4)
    rows_dev = c.up(np.arange(r, dtype=np.int32))
    dl = c.up(np.ascontiguousarray(logits))
    c.k.adjust(dl, rows_dev, c.up(adj.rows), V, c.up(adj.offsets), c.up(adj.token), c.up(adj.count),
               c.up(adj.bias), c.up(adj.presence), c.up(adj.frequency), c.up(adj.pending), c.up(tokens), scratch, a)
    adj_row = np.full(r, -1, np.int32)
    adj_row[adj.rows] = np.arange(a, dtype=np.int32)
    out = c.zeros(r * 4)
    c.k.sample(dl, rows_dev, V, c.up(temps), c.up(top_p), c.up(top_k), c.up(seed), c.up(step.astype(np.uint64)),
               c.up(min_p), c.up(adj_row), scratch, out, r)
    got = c.down(out, (r,), np.int32)
    mism = int((got != ref).sum())
    c.record(f"adjust_rows+sample_rows ({r} rows, penalties/bias/min-p)", float(mism), 0.0,
             f"mismatched rows={mism}")
    c.free()


def check_token_mask(c: Ctx):
    """token_mask.cu == its twin kernels.token_mask.masked_rows, bit for bit; then sampling the masked
    rows draws only allowed tokens and the ids the numpy sampler draws."""
    from kernels.token_mask import TokenMask, kernel_args, mask_words, masked_rows
    r = 16
    logits = (c.rng.standard_normal((r + 3, V)) * 3).astype(np.float32)
    sampled = c.rng.permutation(r + 3)[:r].astype(np.int32)
    words = mask_words(V)
    cons = np.array([0, 3, 4, 9, 15], np.int32)
    bits = np.zeros((len(cons), words), np.uint32)
    for j in range(len(cons)):
        allowed = c.rng.choice(V, size=int(c.rng.integers(1, 40)), replace=False)
        for t in allowed:
            bits[j, t // 32] |= np.uint32(1 << (t % 32))
    mask = TokenMask(cons, bits)
    bit_row = kernel_args(r, mask)
    ref = masked_rows(logits, sampled, bits, bit_row)
    out = c.zeros(r * V * 4)
    c.k.token_mask(c.up(logits), c.up(sampled), c.up(bits), c.up(bit_row), out, V, words, r)
    got = c.down(out, (r, V), np.float32)
    bad = int((got.view(np.uint32) != ref.view(np.uint32)).sum())
    c.record(f"token_mask_rows ({r} rows, {len(cons)} constrained)", float(bad), 0.0, f"mismatched values={bad}")
    c.free()
    check_sampling(c, ref)
    check_fused_mask(c, logits, sampled, mask)


def check_fused_mask(c: Ctx, logits: np.ndarray, sampled: np.ndarray, mask):
    """sample_rows reading the logits through the rows' masks (the fused path, AOTX_FUSED_MASK) draws the
    ids the numpy sampler draws from the masked rows (kernels.token_mask.masked_rows), exactly, and only
    allowed tokens; greedy, temperature, top-k and top-p rows."""
    from kernels.token_mask import allowed, kernel_args, masked_rows
    r = len(sampled)
    bit_row = kernel_args(r, mask)
    temps = np.array([0.0, 0.7, 1.0, 1.3] * (r // 4 + 1), np.float32)[:r]
    top_p = np.array([1.0, 0.9, 0.5, 0.95, 1.0, 0.3, 0.99, 0.8] * (r // 8 + 1), np.float32)[:r]
    top_k = np.array([0, 0, 50, 1, 5, 0, 1000, 40000] * (r // 8 + 1), np.int32)[:r]
    seed = c.rng.integers(0, 2 ** 63, r).astype(np.uint64)
    step = c.rng.integers(0, 1000, r).astype(np.int64)
    ref = sampler.sample(masked_rows(logits, sampled, mask.bits, bit_row), SamplingRows(temps, top_p, top_k, seed, step))
    out = c.zeros(r * 4)
    c.k.sample(c.up(np.ascontiguousarray(logits)), c.up(sampled), V, c.up(temps), c.up(top_p), c.up(top_k),
               c.up(seed), c.up(step.astype(np.uint64)), c.up(np.zeros(r, np.float32)), c.up(np.full(r, -1, np.int32)),
               0, out, r, c.up(np.ascontiguousarray(mask.bits)), c.up(bit_row), mask.bits.shape[1])
    got = c.down(out, (r,), np.int32)
    ok = allowed(mask.bits, V)
    refused = sum(int(not ok[j, got[row]]) for j, row in enumerate(mask.rows))
    mism = int((got != ref).sum())
    c.record(f"sample_rows with token masks fused ({r} rows, {len(mask.rows)} constrained)", float(mism + refused),
             0.0, f"mismatched rows={mism} refused tokens drawn={refused}")
    c.free()


def run_all() -> list:
    c = Ctx()
    print(f"device {c.dev.name} {c.dev.arch} sms={c.dev.sm_count}", flush=True)
    from ops.gpu.decode_attention_check import check_decode_attention
    from ops.gpu.flash_check import check_flash
    from ops.gpu.fused_check import check_attn_o, check_fused
    from ops.gpu.lean_check import check_lean
    from ops.gpu.sampling_check import check_sampling_kernels
    from ops.gpu.wgmma_check import check_wgmma

    for fn in (check_small_ops, check_linear, check_attention, check_sampling_kernels,
               lambda c: check_fused(c, rel), lambda c: check_attn_o(c, rel), lambda c: check_flash(c, rel),
               lambda c: check_wgmma(c, rel), lambda c: check_lean(c, rel),
               lambda c: check_decode_attention(c, rel)):
        try:
            fn(c)
        except Exception as exc:  # report and continue: one broken kernel must not hide the others
            import traceback
            traceback.print_exc()
            c.results.append((getattr(fn, "__name__", "check"), float("inf"), 0.0, False, repr(exc)))
            c.free()
    return c.results
