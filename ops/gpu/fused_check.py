"""The fused T <= 8 decode kernels (kernels/cuda/fused.cu) against their numpy twins
(kernels.cuda.fused_twins) on the model's shapes, T = 1..8, random inputs, poisoned outputs.

Tolerances: the residual after mlp_fused 1e-3 relative (float32 accumulation order; the bf16 act may
round the other way on a few elements, well inside); the logits of lm_head_argmax 1e-3; its ids must
equal the greedy rule (lowest id on ties) applied to the logits it wrote, exactly, and agree with the
twin's ids on >= 7/8 rows (random logits have near ties that float32 order may flip). Repeated
launches check that the grid barrier and the argmax keys reset themselves.
"""
from __future__ import annotations

import numpy as np

from kernels.cuda.fused_twins import greedy_ids, lm_head_argmax_twin, mlp_fused_twin
from kernels.cuda.twins import interleave_gate_up, round_bf16, to_bf16


def page_tables(rng, lens: np.ndarray, page: int, n_pages: int) -> tuple[int, np.ndarray]:
    """(width, block tables [len(lens), width]): each sequence's pages drawn from one random permutation
    of the n_pages pages, -1 past its last page."""
    width = int(-(-lens.max() // page))
    perm = rng.permutation(n_pages)
    tables = np.full((len(lens), width), -1, np.int32)
    used = 0
    for s, ln in enumerate(lens):
        np_ = -(-ln // page)
        tables[s, :np_] = perm[used:used + np_]
        used += np_
    return width, tables


H, F, V = 576, 1536, 49152
TOL = 1e-3


def check_fused(c, rel) -> None:
    wgu = round_bf16(c.rng.standard_normal((2 * F, H)).astype(np.float32) / 24)
    wd = round_bf16(c.rng.standard_normal((H, F)).astype(np.float32) / 40)
    wgu_il = interleave_gate_up(wgu)
    wgu_d, wd_d = c.up(to_bf16(wgu_il)), c.up(to_bf16(wd))
    nw = (1 + 0.1 * c.rng.standard_normal(H)).astype(np.float32)
    nw_d = c.up(nw)
    bar = c.zeros(64, poison=False)
    act = c.zeros(8 * F * 2)
    for t in (1, 2, 3, 4, 5, 8):
        res = c.rng.standard_normal((t, H)).astype(np.float32)
        r_d = c.up(res)
        ref = res
        for _ in range(3):   # three launches on one barrier word: it must come back each time
            c.k.mlp_fused(r_d, nw_d, 1e-5, wgu_d, wd_d, act, H, F, t, bar)
            ref = mlp_fused_twin(ref, nw, 1e-5, wgu_il, wd)
        got = c.down(r_d, (t, H), np.float32)
        c.record(f"mlp_fused T={t} (x3 launches)", rel(got, ref), TOL)
    c.free()

    emb = round_bf16(c.rng.standard_normal((V, H)).astype(np.float32) * 0.05)
    res_all = c.rng.standard_normal((16, H)).astype(np.float32)
    h_top = round_bf16(res_all[3] / np.sqrt(np.mean(res_all[3] ** 2)) * 0.2)
    for col in (40000, 77, 2000, 30001):   # row 3's exact top: a tie across blocks; 77 must win
        emb[col] = h_top
    emb_d, nw_d = c.up(to_bf16(emb)), c.up(np.ones(H, np.float32))
    sync = c.zeros(128, poison=False)
    res_d = c.up(res_all)
    for t in (1, 2, 4, 8):
        rows = c.rng.choice(16, t, replace=False).astype(np.int32)
        rows[0] = 3
        logits, ids = c.zeros(t * V * 4), c.zeros(t * 4)
        for rep in range(2):   # the second launch finds the keys and counter reset by the first
            c.k.lm_head_argmax(res_d, c.up(rows), nw_d, 1e-5, emb_d, V, H, t, logits, sync + 8, sync + 4, ids)
            got_l = c.down(logits, (t, V), np.float32)
            got_i = c.down(ids, (t,), np.int32)
            ref_l, ref_i = lm_head_argmax_twin(res_all, rows, np.ones(H, np.float32), 1e-5, emb)
            own = greedy_ids(got_l)
            c.record(f"lm_head_argmax T={t} launch {rep + 1} logits", rel(got_l, ref_l), TOL)
            mism = int((got_i != own).sum())
            c.record(f"lm_head_argmax T={t} launch {rep + 1} ids == greedy(own logits)", float(mism), 0.0,
                     f"ids={got_i.tolist()} tie row wins id {got_i[0]} (want 77)")
            agree = float((got_i == ref_i).mean())
            c.record(f"lm_head_argmax T={t} launch {rep + 1} ids vs twin (agreement)", 1.0 - agree, 1.0 / 8,
                     f"agree={agree:.3f}")
            if got_i[0] != 77:
                c.record(f"lm_head_argmax T={t} tie -> lowest id", 1.0, 0.0, f"got {got_i[0]}")
    c.free()


def check_attn_o(c, rel) -> None:
    """attn_o_fused on decode batches of 1..8 sequences, contexts from 1 to 4,000 keys, 1 to 16 splits;
    each case launched twice on the same barrier word and counters (they must reset themselves)."""
    from kernels.cuda.fused_twins import attn_o_fused_twin

    nh, nkv, d, page, n_pages = 9, 3, 64, 16, 1024
    kc = round_bf16(c.rng.standard_normal((n_pages * page, nkv, d)).astype(np.float32))
    vc = round_bf16(c.rng.standard_normal((n_pages * page, nkv, d)).astype(np.float32))
    wo = round_bf16(c.rng.standard_normal((H, nh * d)).astype(np.float32) / 24)
    dev_k, dev_v, wo_d = c.up(to_bf16(kc)), c.up(to_bf16(vc)), c.up(to_bf16(wo))
    sync = c.zeros(76 + 4 * 8 * nkv, poison=False)
    cases = [([1], 1), ([288], 4), ([17, 300], 4), ([129, 1, 77, 4000], 16), ([5] * 8, 1),
             ([40, 1000, 2, 300, 128, 129, 7, 2048], 8)]
    for lens, nsplit in cases:
        lens = np.array(lens, np.int32)
        b = len(lens)
        width, tables = page_tables(c.rng, lens, page, n_pages)
        qs = np.arange(b + 1, dtype=np.int32)
        positions = (lens - 1).astype(np.int32)
        q = c.rng.standard_normal((b, nh, d)).astype(np.float32)
        res = c.rng.standard_normal((b, H)).astype(np.float32)
        r_d = c.up(res)
        attn, po, pm = c.zeros(b * nh * d * 2), c.zeros(b * nh * nsplit * d * 4), c.zeros(b * nh * nsplit * 2 * 4)
        args = (c.up(q), dev_k, dev_v, c.up(np.arange(b, dtype=np.int32)), c.up(positions), c.up(lens),
                c.up(tables), width, page, 1.0 / 8.0, b, nkv, nsplit, attn, po, pm, wo_d, r_d, H, sync + 76, sync + 72)
        ref = res
        for _ in range(2):
            c.k.attn_o_fused(*args)
            ref = attn_o_fused_twin(ref, q, kc, vc, positions, qs, lens, tables, page, 1.0 / 8.0, wo)
        c.record(f"attn_o_fused B={b} ctx<={lens.max()} splits={nsplit} (x2 launches)",
                 rel(c.down(r_d, (b, H), np.float32), ref), TOL)
        got_sync = c.down(sync, (19 + 8 * nkv,), np.uint32)
        c.record(f"attn_o_fused B={b} splits={nsplit} counters reset", float(np.count_nonzero(got_sync[19:])), 0.0)
    c.free()
