"""The lean T <= 8 decode kernels (kernels/cuda/lean.cu, AOTX_LEAN=1) against their numpy twins on
the model's shapes, T = 1..8, random inputs, poisoned outputs.

Tolerances (kernel_check's): q float32 1e-3 relative; the K/V cache rows bf16 8e-3; the residual after
the lean attention + o_lean (against fused_twins.attn_o_fused_twin) and after mlp_lean (against
fused_twins.mlp_fused_twin) 1e-3, as fused_check's.
A padded row (slot -1) must leave the caches untouched. Each attention case runs twice (no state may
carry over between launches).
"""
from __future__ import annotations

import numpy as np

from kernels.cuda.fused_twins import attn_o_fused_twin, mlp_fused_twin
from kernels.cuda.launchers import QkvNext
from kernels.cuda.lean_twins import qkv_lean_twin
from kernels.cuda.twins import from_bf16, interleave_gate_up, round_bf16, to_bf16
from kernels.ops_rope import rope_cos_sin
from ops.gpu.fused_check import page_tables

H, HQ, KVW, D, NH, NKV, F = 576, 576, 192, 64, 9, 3, 1536
TOL_F32, TOL_BF16 = 1e-3, 8e-3


def check_qkv(c, rel) -> None:
    cos, sin = rope_cos_sin(np.arange(8192), D, 100000.0)
    rope_d = c.up(np.stack([cos, sin], -1))
    wq = round_bf16(c.rng.standard_normal((HQ + 2 * KVW, H)).astype(np.float32) / 24)
    wq_d = c.up(to_bf16(wq))
    nw = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
    nw_d = c.up(nw)
    for t in range(1, 9):
        res = c.rng.standard_normal((t, H)).astype(np.float32) * 3
        pos = c.rng.integers(0, 8000, t).astype(np.int32)
        slots = c.rng.choice(1024, t, replace=False).astype(np.int32)
        if t > 1:
            slots[-1] = -1   # a padded row: nothing written
        q_out, kc, vc = c.zeros(t * HQ * 4), c.zeros(1024 * KVW * 2, False), c.zeros(1024 * KVW * 2, False)
        c.k.qkv_lean(c.up(res), nw_d, 1e-5, wq_d, HQ + 2 * KVW, H, t, c.up(pos), rope_d, c.up(slots), q_out, kc, vc,
                     D, HQ, KVW)
        k_ref, v_ref = np.zeros((1024, KVW), np.float32), np.zeros((1024, KVW), np.float32)
        q_ref = qkv_lean_twin(res, nw, 1e-5, wq, pos, cos, sin, slots, k_ref, v_ref, D)
        c.record(f"qkv_lean q (norm, rope) T={t}", rel(c.down(q_out, (t, HQ), np.float32), q_ref), TOL_F32)
        got_k = from_bf16(c.down(kc, (1024, KVW), np.uint16))
        got_v = from_bf16(c.down(vc, (1024, KVW), np.uint16))
        c.record(f"qkv_lean k,v -> cache T={t}", max(rel(got_k, k_ref), rel(got_v, v_ref)), TOL_BF16,
                 f"untouched rows nonzero={int(np.count_nonzero(got_k[np.setdiff1d(np.arange(1024), slots)]))}")
        c.free()
        rope_d, wq_d, nw_d = c.up(np.stack([cos, sin], -1)), c.up(to_bf16(wq)), c.up(nw)
    c.free()


def check_attn_o(c, rel) -> None:
    """lean attention + o_lean on decode batches of 1..8 sequences, contexts 1 to 4,000 keys, 1 to 8 splits."""
    page, n_pages = 16, 1024
    kc = round_bf16(c.rng.standard_normal((n_pages * page, NKV, D)).astype(np.float32))
    vc = round_bf16(c.rng.standard_normal((n_pages * page, NKV, D)).astype(np.float32))
    wo = round_bf16(c.rng.standard_normal((H, NH * D)).astype(np.float32) / 24)
    dev_k, dev_v, wo_d = c.up(to_bf16(kc)), c.up(to_bf16(vc)), c.up(to_bf16(wo))
    m = _mlp_weights(c)
    sync, act = c.zeros(76 + 4 * 8 * NKV, poison=False), c.zeros(8 * F * 2)
    cases = [([1], 1), ([288], 1), ([288], 4), ([288], 8), ([17, 300], 2), ([129, 1, 77, 4000], 8), ([5] * 8, 1),
             ([40, 1000, 2, 300, 128, 129, 7, 2048], 8), ([64, 65, 63], 3), ([2048] * 6, 5), ([300] * 7, 8)]
    for lens, nsplit in cases:
        lens = np.array(lens, np.int32)
        b = len(lens)
        width, tables = page_tables(c.rng, lens, page, n_pages)
        qs = np.arange(b + 1, dtype=np.int32)
        positions = (lens - 1).astype(np.int32)
        q = c.rng.standard_normal((b, NH, D)).astype(np.float32)
        res = c.rng.standard_normal((b, H)).astype(np.float32)
        r_d = c.up(res)
        attn, po, pm = c.zeros(b * NH * D * 2), c.zeros(b * NH * nsplit * D * 4), c.zeros(b * NH * nsplit * 2 * 4)
        q_d, seq_d, pos_d, len_d, bt_d = (c.up(q), c.up(np.arange(b, dtype=np.int32)), c.up(positions), c.up(lens),
                                          c.up(tables))
        ref = res
        for _ in range(2):
            c.k.lean_attention(q_d, dev_k, dev_v, seq_d, pos_d, len_d, bt_d, width, page, 1.0 / 8.0, b, NKV, nsplit,
                               attn, po, pm)
            c.k.o_lean(attn, po, pm, nsplit, NH, wo_d, r_d, H, b)
            ref = attn_o_fused_twin(ref, q, kc, vc, positions, qs, lens, tables, page, 1.0 / 8.0, wo)
        c.record(f"lean attention+o_lean B={b} ctx<={lens.max()} splits={nsplit} (x2)",
                 rel(c.down(r_d, (b, H), np.float32), ref), TOL_F32)
        # AOTX_LEAN=2: the merged attention, then omlp_lean (O + residual, then the MLP)
        r_d = c.up(res)
        ref = res
        for _ in range(2):
            c.k.lean_attention_merged(q_d, dev_k, dev_v, seq_d, pos_d, len_d, bt_d, width, page, 1.0 / 8.0, b, NKV,
                                      nsplit, attn, po, pm, sync + 76)
            c.k.omlp_lean(r_d, m["nw_d"], 1e-5, m["wgu_d"], m["wd_d"], act, H, F, b, sync, attn, wo_d, NH * D)
            ref = attn_o_fused_twin(ref, q, kc, vc, positions, qs, lens, tables, page, 1.0 / 8.0, wo)
            ref = mlp_fused_twin(ref, m["nw"], 1e-5, m["wgu_il"], m["wd"])
        c.record(f"lean merged attention+omlp_lean B={b} ctx<={lens.max()} splits={nsplit} (x2)",
                 rel(c.down(r_d, (b, H), np.float32), ref), TOL_F32)
        got_sync = c.down(sync, (19 + 8 * NKV,), np.uint32)
        c.record(f"lean merged B={b} splits={nsplit} counters reset, barrier back",
                 float(np.count_nonzero(got_sync[19:]) + (got_sync[0] & 0x7FFFFFFF)), 0.0)
    c.free()


def _mlp_weights(c) -> dict:
    wgu = round_bf16(c.rng.standard_normal((2 * F, H)).astype(np.float32) / 24)
    wd = round_bf16(c.rng.standard_normal((H, F)).astype(np.float32) / 40)
    wgu_il = interleave_gate_up(wgu)
    nw = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
    return {"wgu_il": wgu_il, "wd": wd, "nw": nw, "wgu_d": c.up(to_bf16(wgu_il)), "wd_d": c.up(to_bf16(wd)),
            "nw_d": c.up(nw)}


def _mlp_weights_up(c, m: dict) -> dict:
    """The same host weights uploaded again (after c.free())."""
    return dict(m, wgu_d=c.up(to_bf16(m["wgu_il"])), wd_d=c.up(to_bf16(m["wd"])), nw_d=c.up(m["nw"]))


def check_mlp(c, rel) -> None:
    """mlp_lean T = 1..8, three launches each on one barrier word (it must come back each time)."""
    m = _mlp_weights(c)
    wgu_il, wd, nw, wgu_d, wd_d, nw_d = m["wgu_il"], m["wd"], m["nw"], m["wgu_d"], m["wd_d"], m["nw_d"]
    bar = c.zeros(64, poison=False)
    act = c.zeros(8 * F * 2)
    for t in range(1, 9):
        res = c.rng.standard_normal((t, H)).astype(np.float32)
        r_d = c.up(res)
        ref = res
        for _ in range(3):
            c.k.mlp_lean(r_d, nw_d, 1e-5, wgu_d, wd_d, act, H, F, t, bar)
            ref = mlp_fused_twin(ref, nw, 1e-5, wgu_il, wd)
        c.record(f"mlp_lean T={t} (x3 launches)", rel(c.down(r_d, (t, H), np.float32), ref), TOL_F32)
    c.record("mlp_lean barrier word back to its start", float(c.down(bar, (1,), np.uint32)[0] & 0x7FFFFFFF), 0.0)
    c.free()


def check_layer_chain(c, rel) -> None:
    """One whole layer as a step launches it, with programmatic dependent launch on (each kernel's
    pre-wait part overlaps its predecessor, so the lean attention's K/V rows staged before the wait must
    be exactly the ones qkv_lean does not write): qkv_lean -> lean attention -> o_lean -> mlp_lean
    (AOTX_LEAN=1) and qkv_lean -> merged attention -> omlp_lean (=2), prefetch on and off, against the twins
    composed; decode batches of 1..8 at contexts 1..700 (the new key in the first chunk or a later one)."""
    page, n_pages = 16, 512
    cos, sin = rope_cos_sin(np.arange(8192), D, 100000.0)
    wq = round_bf16(c.rng.standard_normal((HQ + 2 * KVW, H)).astype(np.float32) / 24)
    wo = round_bf16(c.rng.standard_normal((H, NH * D)).astype(np.float32) / 24)
    an = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
    wq2 = round_bf16(c.rng.standard_normal((HQ + 2 * KVW, H)).astype(np.float32) / 24)   # the next layer's
    an2 = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
    m = _mlp_weights(c)
    rope_d, wq_d, wo_d, an_d = c.up(np.stack([cos, sin], -1)), c.up(to_bf16(wq)), c.up(to_bf16(wo)), c.up(an)
    sync, act = c.zeros(76 + 4 * 8 * NKV, poison=False), c.zeros(8 * F * 2)
    for lens in ([1], [60], [65], [288], [3, 700], [64, 1, 129, 40], [5, 66, 300, 2, 128, 17, 90, 450]):
        lens = np.array(lens, np.int32)
        b = len(lens)
        width, tables = page_tables(c.rng, lens, page, n_pages)
        positions = (lens - 1).astype(np.int32)
        slots = (tables[np.arange(b), positions // page] * page + positions % page).astype(np.int32)
        kc = round_bf16(c.rng.standard_normal((n_pages * page, KVW)).astype(np.float32))
        vc = round_bf16(c.rng.standard_normal((n_pages * page, KVW)).astype(np.float32))
        res = c.rng.standard_normal((b, H)).astype(np.float32)
        k_ref, v_ref = kc.copy(), vc.copy()
        q = qkv_lean_twin(res, an, 1e-5, wq, positions, cos, sin, slots, k_ref, v_ref, D)
        qs = np.arange(b + 1, dtype=np.int32)
        ref = attn_o_fused_twin(res, q.reshape(b, NH, D), k_ref.reshape(-1, NKV, D), v_ref.reshape(-1, NKV, D),
                                positions, qs, lens, tables, page, 1.0 / 8.0, wo)
        ref = mlp_fused_twin(ref, m["nw"], 1e-5, m["wgu_il"], m["wd"])
        k2_ref, v2_ref = np.zeros((n_pages * page, KVW), np.float32), np.zeros((n_pages * page, KVW), np.float32)
        q2_ref = qkv_lean_twin(ref, an2, 1e-5, wq2, positions, cos, sin, slots, k2_ref, v2_ref, D)
        nsplit = min(8, 1 << max(0, int(-(-lens.max() // 64)) - 1).bit_length())
        for mode in (1, 2, 3) if b <= 4 else (1, 2):
            for prefetch in (True, False):
                kc_d, vc_d, r_d = c.up(to_bf16(kc)), c.up(to_bf16(vc)), c.up(res)
                q_d, attn = c.zeros(b * HQ * 4), c.zeros(b * NH * D * 2)
                po, pm = c.zeros(b * NH * nsplit * D * 4), c.zeros(b * NH * nsplit * 2 * 4)
                arrs = [c.up(a) for a in (positions, slots, np.arange(b, dtype=np.int32), lens, tables)]
                pos_d, slot_d, seq_d, len_d, bt_d = arrs
                wq2_d, an2_d, q2_d = c.up(to_bf16(wq2)), c.up(an2), c.zeros(b * HQ * 4)
                k2_d, v2_d = c.zeros(n_pages * page * KVW * 2, False), c.zeros(n_pages * page * KVW * 2, False)
                c.dev.synchronize()
                c.k.pdl, c.k.lean_prefetch = True, prefetch
                try:
                    c.k.qkv_lean(r_d, an_d, 1e-5, wq_d, HQ + 2 * KVW, H, b, pos_d, rope_d, slot_d, q_d, kc_d, vc_d, D,
                                 HQ, KVW)
                    if mode == 1:
                        c.k.lean_attention(q_d, kc_d, vc_d, seq_d, pos_d, len_d, bt_d, width, page, 1.0 / 8.0, b,
                                           NKV, nsplit, attn, po, pm)
                        c.k.o_lean(attn, po, pm, nsplit, NH, wo_d, r_d, H, b)
                        c.k.mlp_lean(r_d, m["nw_d"], 1e-5, m["wgu_d"], m["wd_d"], act, H, F, b, sync)
                    else:
                        c.k.lean_attention_merged(q_d, kc_d, vc_d, seq_d, pos_d, len_d, bt_d, width, page, 1.0 / 8.0,
                                                  b, NKV, nsplit, attn, po, pm, sync + 76)
                        if mode == 2:
                            c.k.omlp_lean(r_d, m["nw_d"], 1e-5, m["wgu_d"], m["wd_d"], act, H, F, b, sync, attn, wo_d,
                                          NH * D)
                        else:   # the next layer's qkv inside: its own weights, caches and q
                            c.k.omlpq_lean(r_d, m["nw_d"], 1e-5, m["wgu_d"], m["wd_d"], act, H, F, b, sync, attn,
                                           wo_d, NH * D, QkvNext(wq2_d, an2_d, pos_d, rope_d, slot_d, q2_d, k2_d, v2_d,
                                                                 HQ + 2 * KVW, D, HQ, KVW))
                finally:
                    c.k.pdl, c.k.lean_prefetch = False, True
                c.record(f"lean layer chain AOTX_LEAN={mode} prefetch={int(prefetch)} B={b} ctx<={lens.max()} "
                         f"splits={nsplit}", rel(c.down(r_d, (b, H), np.float32), ref), TOL_F32)
                if mode == 3:
                    got_k2 = from_bf16(c.down(k2_d, (n_pages * page, KVW), np.uint16))
                    got_v2 = from_bf16(c.down(v2_d, (n_pages * page, KVW), np.uint16))
                    c.record(f"lean layer chain AOTX_LEAN=3 B={b} next layer's q", rel(c.down(q2_d, (b, HQ), np.float32),
                                                                                        q2_ref), TOL_F32)
                    c.record(f"lean layer chain AOTX_LEAN=3 B={b} next layer's k,v -> cache",
                             max(rel(got_k2, k2_ref), rel(got_v2, v2_ref)), TOL_BF16)
        c.free()
        rope_d, wq_d, wo_d, an_d = c.up(np.stack([cos, sin], -1)), c.up(to_bf16(wq)), c.up(to_bf16(wo)), c.up(an)
        m = _mlp_weights_up(c, m)
        sync, act = c.zeros(76 + 4 * 8 * NKV, poison=False), c.zeros(8 * F * 2)
    c.free()


def check_lean(c, rel) -> None:
    check_qkv(c, rel)
    check_attn_o(c, rel)
    check_mlp(c, rel)
    check_layer_chain(c, rel)


def e2e(bundle, real: bool, record, mode: str = "1") -> None:
    """ops.gpu.model_check end to end (prefill logits, batched, batch-8 and batch-1 decode graphs against
    the numpy backend; on real weights the greedy France answer) with AOTX_LEAN=mode: every step of <= 8
    tokens runs the lean plan. Names get the prefix "lean<mode> "."""
    import os

    from ops.gpu import model_check

    old = os.environ.get("AOTX_LEAN")
    os.environ["AOTX_LEAN"] = mode
    try:
        model_check.run(bundle, real,
                        lambda name, value, thr, extra="": record(f"lean{mode} " + name, value, thr, extra))
    finally:
        if old is None:
            del os.environ["AOTX_LEAN"]
        else:
            os.environ["AOTX_LEAN"] = old


def main(argv=None) -> int:
    """``python3 -m ops.gpu.lean_check [--real]``: these checks and the random-weights end to end with
    AOTX_LEAN=1 and =2 alone (make gpu-check runs them with the rest; top-1 on random weights is
    information only); --real: only the end to end on the GGUF ($AOTX_MODEL_PATH), top-1 and France too."""
    import sys
    import time

    from ops.gpu import model_check
    from ops.gpu.kernel_check import Ctx, rel

    argv = sys.argv[1:] if argv is None else argv
    if "--real" in argv:
        from kernels import load_model

        results = []

        def record_real(name, value, thr, extra=""):   # model_check's rule, as ops.gpu.check
            ok = value <= thr if "greedy France" in name else value >= thr   # (its names carry a "lean<mode> " prefix)
            if isinstance(extra, float):
                ok, extra = ok and extra >= 0.95, f"top1={extra:.3f} (>= 0.95)"
            results.append(ok)
            print(f"{'PASS' if ok else 'FAIL'} real {name:<50} {value:.5f} thr={thr} {extra}", flush=True)
        bundle = load_model(progress=False)
        for mode in ("1", "2", "3"):
            e2e(bundle, True, record_real, mode)
        print(f"lean real checks: {sum(results)}/{len(results)} passed", flush=True)
        return 0 if all(results) else 1
    t0 = time.time()
    c = Ctx()
    print(f"device {c.dev.name} {c.dev.arch} sms={c.dev.sm_count}", flush=True)
    check_lean(c, rel)

    def record(name, value, thr, extra=""):   # cosines: at least thr (top-1 printed, not judged)
        ok = bool(value >= thr)
        c.results.append((name, value, thr, ok, extra))
        print(f"{'PASS' if ok else 'FAIL'} random {name:<48} {value:.5f} thr={thr} {extra}", flush=True)
    bundle = model_check.random_bundle()
    for mode in ("1", "2", "3"):
        e2e(bundle, False, record, mode)
    return c.summary("lean", t0)


if __name__ == "__main__":
    raise SystemExit(main())
