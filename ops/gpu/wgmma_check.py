"""gpu-check entries for linear_wgmma (kernels/cuda/linear_wgmma.cu, AOTX_WGMMA) against its twin: numpy
`x @ w.T` on the same bf16-rounded inputs, composed with the epilogue twins as kernel_check.check_linear
does for linear_mma.

* Every projection shape of SmolLM2-135M (qkv 960x576, o 576x576, gate_up 3072x576, down 576x1536,
  lm_head 49152x576) at T = 64, 77 (odd, not a tile multiple), 256 and 1,024 (the LM head at 64 / 77 /
  256), on every tile variant, cp.async and TMA loads (kernels.cuda.wgmma_plan.ALL_VARIANTS), EPI_STORE: tolerance 1e-3 relative
  (float32 output; accumulation order only: the CPU emulation of the kernel's index logic,
  kernels/cuda/wgmma_twin.py, is exact, so anything above ~1e-6 is a layout or pipeline bug). The output
  is poisoned first (NaN): a tile never written fails.
* The fused epilogues through the variant the plan picks (cp.async, then TMA), at T = 64, 77, 256, 1,024
  (gate/up's 128 x 256 tile): EPI_QKV (RoPE, q out, k / v into the paged caches; 1e-3 / 8e-3 bf16),
  EPI_SWIGLU (bf16 out, 8e-3), EPI_ADD (residual, 1e-3).
* The folded RMSNorm (kernels/cuda/norm_fusion.py) at the same T: ``check_folded_norm``.
* End to end (``e2e``): the CUDA backend with AOTX_WGMMA=1, then =tma, then =tma with the folded norms
  (AOTX_FUSED_NORM=1), against the numpy backend: 60
  prompts prefilled in one step with logits at every position (every GEMM and the LM head on wgmma),
  then 3 batched decode steps of the 60 sequences (bucket 64: the graphs, on wgmma). cos >= 0.99 per row,
  top-1 >= 95% (on real weights; printed only on random ones).

    python -m ops.gpu.wgmma_check [--real]
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from kernels.cuda import launchers as L, wgmma_plan
from kernels.cuda.twins import from_bf16, interleave_gate_up, round_bf16, to_bf16
from kernels.ops_mlp import swiglu
from kernels.ops_rope import apply_rope, rope_cos_sin

H, HQ, KVW, F, V, D, NH, NKV = 576, 576, 192, 1536, 49152, 64, 9, 3
TOL_F32, TOL_BF16 = 1e-3, 8e-3
SHAPES = ((960, H, "qkv"), (H, HQ, "o"), (2 * F, H, "gate_up"), (H, F, "down"), (V, H, "lm_head"))


def _loaded(c):
    if c.k.wgmma is None:
        c.k.wgmma = wgmma_plan.Wgmma(c.k)
    return c.k.wgmma


def check_wgmma(c, rel) -> None:
    """c: kernel_check.Ctx; rel: its relative-error measure."""
    wg = _loaded(c)
    n_before = len(c.results)
    for n, k, name in SHAPES:
        w = (c.rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        wb = to_bf16(w)
        wf, wd = from_bf16(wb), c.up(wb)
        for t in ((64, 77, 256) if name == "lm_head" else (64, 77, 256, 1024)):
            xb = to_bf16(c.rng.standard_normal((t, k)).astype(np.float32))
            xd = c.up(xb)
            ref = from_bf16(xb) @ wf.T
            out = c.zeros(t * n * 4)
            pick = wgmma_plan.choose(t, n, c.dev.sm_count, k)
            for variant in wgmma_plan.ALL_VARIANTS:
                wg.launch(xd, t, wd, n, k, L.epi(L.EPI_STORE, out_f32=out, ld=n), variant)
                got = c.down(out, (t, n), np.float32)
                picked = " (plan's pick)" if variant.replace("_tma_", "_") == pick else ""
                c.record(f"{variant} {name} T={t}{picked}", rel(got, ref), TOL_F32, _where(got, ref))
                _poison(c, out, t * n * 4)
        c.free()
    failed = {r[0].split(" ")[0] for r in c.results[n_before:] if not r[3]}
    for variant in sorted(failed & set(wgmma_plan.ALL_VARIANTS)):
        probe(c, wg, variant)
    cos, sin = rope_cos_sin(np.arange(8192), D, 100000.0)
    for t, tma in [(t, tma) for tma in (False, True) for t in (64, 77, 256, 1024)]:   # 1,024: gate/up on 128x256
        wg.tma = tma
        tag = "linear_wgmma_tma" if tma else "linear_wgmma"
        rope_d = c.up(np.stack([cos, sin], -1))
        h = c.rng.standard_normal((t, H)).astype(np.float32)
        hb = round_bf16(h)
        h_dev = c.up(to_bf16(h))
        wq = c.rng.standard_normal((960, H)).astype(np.float32) / 24
        pos = c.rng.integers(0, 8000, t).astype(np.int32)
        slots = c.rng.choice(1024, t, replace=False).astype(np.int32)
        q_out, kc, vc = c.zeros(t * HQ * 4), c.zeros(1024 * KVW * 2, False), c.zeros(1024 * KVW * 2, False)
        wg.launch(h_dev, t, c.up(to_bf16(wq)), 960, H, L.epi(
            L.EPI_QKV, out_f32=q_out, positions=c.up(pos), rope=rope_d, slots=c.up(slots), k_cache=kc, v_cache=vc,
            head_dim=D, q_size=HQ, kv_size=KVW))
        y = hb @ round_bf16(wq).T
        q_ref = apply_rope(y[:, :HQ].reshape(t, NH, D), cos[pos], sin[pos]).reshape(t, HQ)
        k_ref = apply_rope(y[:, HQ:HQ + KVW].reshape(t, NKV, D), cos[pos], sin[pos]).reshape(t, KVW)
        c.record(f"{tag} EPI_QKV q (rope) T={t}", rel(c.down(q_out, (t, HQ), np.float32), q_ref), TOL_F32)
        got_k = from_bf16(c.down(kc, (1024, KVW), np.uint16))[slots]
        got_v = from_bf16(c.down(vc, (1024, KVW), np.uint16))[slots]
        c.record(f"{tag} EPI_QKV k,v -> cache T={t}",
                 max(rel(got_k, k_ref), rel(got_v, y[:, HQ + KVW:])), TOL_BF16)

        wgu = c.rng.standard_normal((2 * F, H)).astype(np.float32) / 24
        act = c.zeros(t * F * 2)
        wg.launch(h_dev, t, c.up(to_bf16(interleave_gate_up(wgu))), 2 * F, H, L.epi(L.EPI_SWIGLU, out_bf16=act, ld=F))
        c.record(f"{tag} EPI_SWIGLU T={t}",
                 rel(from_bf16(c.down(act, (t, F), np.uint16)), swiglu(hb @ round_bf16(wgu).T)), TOL_BF16)

        res = c.rng.standard_normal((t, H)).astype(np.float32)
        for n_in, label in ((HQ, "o"), (F, "down")):
            wo = c.rng.standard_normal((H, n_in)).astype(np.float32) / np.sqrt(n_in)
            a_in = c.rng.standard_normal((t, n_in)).astype(np.float32)
            r_dev = c.up(res)
            wg.launch(c.up(to_bf16(a_in)), t, c.up(to_bf16(wo)), H, n_in, L.epi(L.EPI_ADD, out_f32=r_dev, ld=H))
            c.record(f"{tag} EPI_ADD ({label} + residual) T={t}",
                     rel(c.down(r_dev, (t, H), np.float32), res + round_bf16(a_in) @ round_bf16(wo).T), TOL_F32)
        check_folded_norm(c, rel, wg, t, tag, res, rope_d, cos, sin)
        c.free()
    wg.tma = False


def check_folded_norm(c, rel, wg, t, tag, res, rope_d, cos, sin) -> None:
    """The RMSNorm folded into the projections (kernels/cuda/norm_fusion.py): o's EPI_ADD with norm_out writes
    the residual, h = bf16(r * w) and each row's sums of r^2 by 64 columns; gate/up (EPI_SWIGLU) and qkv
    (EPI_QKV, q part) read h and scale their rows by rstd from those sums. Each output against numpy on the
    device's own inputs: residual 1e-3, h 8e-3, sums 1e-3, the consumers 8e-3 / 1e-3 (and the whole chain
    against the unfolded add + rmsnorm + GEMM, 1.5e-2: bf16 rounding of r * w instead of r * w * rstd)."""
    from kernels.ops_norm import rmsnorm

    groups = H // 64
    w = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
    wo = c.rng.standard_normal((H, HQ)).astype(np.float32) / np.sqrt(HQ)
    a_in = c.rng.standard_normal((t, HQ)).astype(np.float32)
    r_dev, h_dev, ss_dev = c.up(res), c.zeros(t * H * 2), c.zeros(t * groups * 4)
    wg.launch(c.up(to_bf16(a_in)), t, c.up(to_bf16(wo)), H, HQ, L.epi(
        L.EPI_ADD, out_f32=r_dev, ld=H, norm_w=c.up(w), norm_out=h_dev, ss_out=ss_dev, ss_groups=groups, eps=1e-5))
    r_ref = res + round_bf16(a_in) @ round_bf16(wo).T
    r_got, h_got = c.down(r_dev, (t, H), np.float32), from_bf16(c.down(h_dev, (t, H), np.uint16))
    ss_got = c.down(ss_dev, (t, groups), np.float32)
    c.record(f"{tag} EPI_ADD + folded norm: residual T={t}", rel(r_got, r_ref), TOL_F32)
    c.record(f"{tag} EPI_ADD + folded norm: h = bf16(r w) T={t}", rel(h_got, round_bf16(r_got * w)), TOL_BF16)
    c.record(f"{tag} EPI_ADD + folded norm: sums of r^2 by 64 columns T={t}",
             rel(ss_got, (r_got.astype(np.float64) ** 2).reshape(t, groups, 64).sum(-1)), TOL_F32)
    rstd = (1.0 / np.sqrt(ss_got.astype(np.float64).sum(1) / H + 1e-5))[:, None]
    wgu = c.rng.standard_normal((2 * F, H)).astype(np.float32) / 24
    act = c.zeros(t * F * 2)
    wg.launch(h_dev, t, c.up(to_bf16(interleave_gate_up(wgu))), 2 * F, H, L.epi(
        L.EPI_SWIGLU, out_bf16=act, ld=F, ss_in=ss_dev, ss_groups=groups, eps=1e-5))
    got = from_bf16(c.down(act, (t, F), np.uint16))
    c.record(f"{tag} EPI_SWIGLU + folded norm (rows x rstd) T={t}",
             rel(got, swiglu(rstd * (h_got @ round_bf16(wgu).T))), TOL_BF16)
    c.record(f"{tag} folded chain == add + rmsnorm + gate/up + SwiGLU T={t}",
             rel(got, swiglu(round_bf16(rmsnorm(r_ref, w, 1e-5)) @ round_bf16(wgu).T)), 1.5e-2)
    wq = c.rng.standard_normal((960, H)).astype(np.float32) / 24
    pos = c.rng.integers(0, 8000, t).astype(np.int32)
    q_out, kc, vc = c.zeros(t * HQ * 4), c.zeros(1024 * KVW * 2, False), c.zeros(1024 * KVW * 2, False)
    wg.launch(h_dev, t, c.up(to_bf16(wq)), 960, H, L.epi(
        L.EPI_QKV, out_f32=q_out, positions=c.up(pos), rope=rope_d, slots=c.up(np.arange(t, dtype=np.int32) % 1024),
        k_cache=kc, v_cache=vc, head_dim=D, q_size=HQ, kv_size=KVW, ss_in=ss_dev, ss_groups=groups, eps=1e-5))
    y = rstd * (h_got @ round_bf16(wq).T)
    q_ref = apply_rope(y[:, :HQ].reshape(t, NH, D), cos[pos], sin[pos]).reshape(t, HQ)
    c.record(f"{tag} EPI_QKV + folded norm (rows x rstd) q T={t}", rel(c.down(q_out, (t, HQ), np.float32), q_ref),
             TOL_F32)


def probe(c, wg, variant: str) -> None:
    """Where a failing variant puts things (printed, and saved under $AOTX_WGMMA_DUMP if set): one tile,
    M = BM, K = 64, N = BN, A = [I | 0] (out[i, n] = w[n, i]) and W holding (1) its k index (out[i, n]
    should be i: which A row landed in each output row) and (2) its n index modulo 256 (out[i, n] should
    be n % 256: which W row landed in each output column); integers below 256 are exact in bf16."""
    bm, bn, _ = wgmma_plan.ALL_VARIANTS[variant]
    x = np.zeros((bm, 64), np.float32)
    x[np.arange(min(bm, 64)), np.arange(min(bm, 64))] = 1.0
    if bm > 64:
        x[64 + np.arange(bm - 64), np.arange(bm - 64)] = 1.0   # rows 64.. repeat rows 0..: expect i % 64
    maps = {}
    for label, w in (("row", np.tile(np.arange(64, dtype=np.float32), (bn, 1))),
                     ("col", np.tile((np.arange(bn) % 256).astype(np.float32)[:, None], (1, 64)))):
        out = c.zeros(bm * bn * 4)
        wg.launch(c.up(to_bf16(x)), bm, c.up(to_bf16(w)), bn, 64, L.epi(L.EPI_STORE, out_f32=out, ld=bn), variant)
        got = c.down(out, (bm, bn), np.float32)
        want = (np.arange(bm) % 64)[:, None] * np.ones((1, bn)) if label == "row" else \
            np.ones((bm, 1)) * (np.arange(bn) % 256)[None, :]
        bad = np.argwhere(got != want)
        maps[label] = got
        where = ", ".join(f"({i},{j}): {got[i, j]:g} not {want[i, j]:g}" for i, j in bad[:6])
        print(f"  probe {variant} {label} map: {len(bad)} of {got.size} wrong" + (f"; first {where}" if len(bad) else ""),
              flush=True)
    dump = os.environ.get("AOTX_WGMMA_DUMP")
    if dump:
        path = os.path.join(dump, f"probe_{variant}.npz")
        np.savez_compressed(path, **maps)
        print(f"  dumped {path}", flush=True)


def _poison(c, ptr: int, nbytes: int) -> None:
    """Refill an output with NaN patterns (0xFF bytes) between variants."""
    from kernels.cuda import driver

    driver.htod(ptr, np.full(nbytes, 0xFF, dtype=np.uint8), c.dev.stream)


def _where(got, ref) -> str:
    bad = ~np.isfinite(got)
    if bad.any():
        rows, cols = np.nonzero(bad)
        return f"non-finite: {int(bad.sum())} values, rows {rows.min()}..{rows.max()}, cols {cols.min()}..{cols.max()}"
    d = np.abs(got - ref)
    r, col = np.unravel_index(int(np.argmax(d)), d.shape)
    return f"max|d|={d[r, col]:.2e} at ({r}, {col})"


def e2e(bundle, real: bool, record, prompts=None) -> None:
    """The backend with AOTX_WGMMA=1 against the numpy backend (see the module doc). Names: "wgmma e2e ..."."""
    from kernels import create_backend
    from ops.gpu.model_check import PROMPTS, _batch, compare

    if prompts is None:
        if real:
            tok = bundle.tokenizer
            base = [tok.encode(bundle.chat_template.render([{"role": "user", "content": p}], add_generation_prompt=True))
                    for p in PROMPTS]
        else:
            rng = np.random.default_rng(9)
            base = [list(rng.integers(3, bundle.config.vocab_size, int(rng.integers(5, 60)))) for _ in PROMPTS]
        prompts = [list(p) for p in base] * 3
    page, per = 16, 8
    npb = create_backend("numpy", bundle, num_pages=per * len(prompts) + 8, page_size=page)
    first = [i * per for i in range(len(prompts))]
    pre = _batch(prompts, page, first, [len(p) for p in prompts], True)
    ref = npb.forward(pre)
    last = np.cumsum([len(p) for p in prompts]) - 1
    seqs, nxt, steps = [list(p) for p in prompts], [int(x) for x in ref[last].argmax(-1)], []
    for _ in range(3):   # the decode steps and their references, made once for both modes
        seqs = [s + [t] for s, t in zip(seqs, nxt)]
        b = _batch(seqs, page, first, [1] * len(seqs), False)
        r_np = npb.forward(b)
        steps.append((b, r_np))
        nxt = [int(x) for x in r_np.argmax(-1)]
    for mode, fold in (("1", False), ("tma", False), ("tma", True)):   # fold: AOTX_FUSED_NORM=1 (norm_fusion)
        old = os.environ.get("AOTX_WGMMA")
        os.environ["AOTX_WGMMA"] = mode
        try:
            cub = create_backend("cuda", bundle, num_pages=per * len(prompts) + 8, page_size=page)
        finally:
            if old is None:
                del os.environ["AOTX_WGMMA"]
            else:
                os.environ["AOTX_WGMMA"] = old
        if cub.k.wgmma is None or cub.k.wgmma.tma != (mode == "tma"):
            raise RuntimeError(f"AOTX_WGMMA={mode} did not load linear_wgmma as asked")
        cub.fused_norm = fold
        name = f"AOTX_WGMMA={mode}" + (" AOTX_FUSED_NORM=1" if fold else "")
        cmin, top1 = compare(ref, np.asarray(cub.forward(pre)))
        record(f"wgmma e2e {name} prefill {len(prompts)} prompts in one step (T={pre.num_tokens}, all rows)"
               " cos_min", cmin, 0.99, top1)
        for step, (b, r_np) in enumerate(steps):
            cmin, top1 = compare(r_np, np.asarray(cub.forward(b)))
            record(f"wgmma e2e {name} decode batch {len(prompts)} step {step} cos_min", cmin, 0.99, top1)
        del cub


def main(argv=None) -> int:
    from kernels.cuda.probe import gpu_present
    from ops.gpu.kernel_check import Ctx, rel

    argv = sys.argv[1:] if argv is None else argv
    if not gpu_present():
        print("wgmma_check needs an NVIDIA GPU", file=sys.stderr)
        return 2
    t0 = time.time()
    c = Ctx()
    print(f"device {c.dev.name} {c.dev.arch} sms={c.dev.sm_count}", flush=True)
    try:
        check_wgmma(c, rel)
    except Exception as exc:
        import traceback
        traceback.print_exc()
        c.results.append(("check_wgmma", float("inf"), 0.0, False, repr(exc)))
    results = c.results
    real = "--real" in argv

    def record(name, value, thr, extra=""):
        ok = value >= thr
        if isinstance(extra, float):
            ok = ok and (extra >= 0.95 or not real)
            extra = f"top1={extra:.3f} ({'>= 0.95' if real else 'info'})"
        results.append((name, value, thr, ok, extra))
        print(f"{'PASS' if ok else 'FAIL'} {name:<60} {value:.5f} thr={thr} {extra}", flush=True)

    try:
        if real:
            from kernels import load_model
            bundle = load_model(progress=False)
        else:
            from ops.gpu.model_check import random_bundle
            bundle = random_bundle()
        e2e(bundle, real, record)
    except Exception as exc:
        import traceback
        traceback.print_exc()
        results.append(("wgmma e2e", 0, 0, False, repr(exc)))
    failed = [r for r in results if not r[3]]
    print(f"{len(results) - len(failed)}/{len(results)} wgmma checks passed in {time.time() - t0:.0f} s")
    for r in failed:
        print(f"FAILED: {r[0]} value={r[1]} {r[4]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
