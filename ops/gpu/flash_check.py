"""gpu-check entries for flash_prefill / flash_prefill_64 (kernels/cuda/flash_attention.cu) against the
attention twin (kernels.ops_attention.paged_attention), on the model's shapes (9 query heads / 3 KV heads,
head dim 64, page 16; two shapes also on 12-token pages): prompts of 1..4,096 tokens in one chunk (tile
multiples and not), chunks of 2,048 / 1,000 tokens at the end of 8,192 / 5,000-token contexts (the engine's
prefill budget is 2,048 tokens a step), several prompts in one step, and prefill chunks mixed with decode
tokens. Every variant on every shape: flash_prefill (16-token tiles), flash_prefill_k2 (the same, two key
groups a block), flash_prefill_64 (64-token tiles), each with two K/V stages and with three (the _s3 kernels).

Tolerance: 8e-3 relative (||out - ref|| / ||ref||, the bf16-output tolerance of kernel_check). The kernel
rounds q (pre-scaled) and the softmax weights P to bf16 for the tensor cores; a numpy emulation of exactly
that rounding on these inputs (q, K, V standard normal, scale 1/8) gives 2.2e-3 to 2.9e-3 for 64 to 8,192
keys. A failure names the shape and prints the worst sequence, token and head.

    python -m ops.gpu.flash_check
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from kernels.cuda import flash_plan
from kernels.cuda.launchers import FLASH_STAGES
from kernels.cuda.twins import from_bf16, round_bf16, to_bf16
from kernels.ops_attention import paged_attention

NH, NKV, D, PAGE = 9, 3, 64, 16
TOL = 8e-3

# (name, [(context length, query tokens this step), ...] per sequence)
CASES = [
    ("prompt 1", [(1, 1)]), ("prompt 15", [(15, 15)]), ("prompt 16", [(16, 16)]), ("prompt 17", [(17, 17)]),
    ("prompt 100", [(100, 100)]), ("prompt 1000", [(1000, 1000)]), ("prompt 1024", [(1024, 1024)]),
    ("prompt 4096", [(4096, 4096)]),
    ("chunk 2048 of 8192", [(8192, 2048)]), ("chunk 1000 of 5000", [(5000, 1000)]),
    ("4 prompts 300/17/64/1", [(300, 300), (17, 17), (64, 64), (1, 1)]),
    ("mixed chunk+decode", [(500, 200), (77, 1), (33, 33), (1500, 1), (2100, 2048 - 235)]),
]


def paged_layout(rng, lens, n_pages, page=PAGE):
    """Block tables [len(lens), width] for sequences of `lens` tokens over `n_pages` pages drawn at random."""
    perm = rng.permutation(n_pages)
    width = int(-(-max(max(lens), 1) // page))
    tables = np.full((len(lens), width), -1, np.int32)
    used = 0
    for s, ln in enumerate(lens):
        k = -(-ln // page)
        tables[s, :k] = perm[used:used + k]
        used += k
    assert used <= n_pages
    return tables, width


def check_flash(c, rel) -> None:
    """c: kernel_check.Ctx; rel: its relative-error measure."""
    n_pages = 2048
    kc = round_bf16(c.rng.standard_normal((n_pages * PAGE, NKV, D)).astype(np.float32))
    vc = round_bf16(c.rng.standard_normal((n_pages * PAGE, NKV, D)).astype(np.float32))
    dev_k, dev_v = c.up(to_bf16(kc)), c.up(to_bf16(vc))
    scale = 1.0 / 8.0
    # every case on 16-token pages; two also on 12-token pages (the kernel's page lookup without the shift)
    odd = [(12, f"{name}, page 12", seqs) for name, seqs in CASES if name in ("prompt 1000", "mixed chunk+decode")]
    for page, name, seqs in [(PAGE, name, seqs) for name, seqs in CASES] + odd:
        lens = np.array([ln for ln, _ in seqs], np.int32)
        nq = np.array([n for _, n in seqs], np.int32)
        tables, width = paged_layout(c.rng, lens, n_pages, page)
        qs = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
        positions = np.concatenate([np.arange(ln - n, ln) for ln, n in seqs]).astype(np.int32)
        tok_seq = np.repeat(np.arange(len(seqs)), nq).astype(np.int32)
        t = int(qs[-1])
        q = c.rng.standard_normal((t, NH, D)).astype(np.float32)
        ref = paged_attention(q, kc[:n_pages * page], vc[:n_pages * page], positions, qs, lens, tables, page, scale)
        dq, dts, dpos, dlens, dbt = c.up(q), c.up(tok_seq), c.up(positions), c.up(lens), c.up(tables)
        for (bq, ks), stages in [(v, s_) for v in flash_plan.VARIANTS for s_ in FLASH_STAGES]:
            tiles = flash_plan.tiles(qs, positions, lens, bq)
            out = c.zeros(t * NH * D * 2)   # poisoned: a row the kernel never writes reads NaN
            c.k.flash_stages = stages
            c.k.flash_attention(dq, dev_k, dev_v, c.up(tiles), len(tiles), bq, ks, dts, dpos, dlens, dbt, width,
                                page, scale, NKV, out)
            c.k.flash_stages = 2
            got = from_bf16(c.down(out, (t, NH, D), np.uint16))
            err = rel(got, ref)
            ok = err <= TOL
            extra = f"max|d|={np.abs(got - ref).max():.2e}" if ok else _worst(got, ref, qs, positions)
            c.record(f"flash_prefill bq={bq} ks={ks} stages={stages} {name} (T={t}, tiles={len(tiles)})", err, TOL,
                     extra)
            if not ok and t <= 512:
                _dump(name, f"{bq}_{ks}_{stages}", got=got, ref=ref, q=q, positions=positions, qs=qs, lens=lens,
                      tiles=tiles, k=kc[_slots(tables, lens, page)], v=vc[_slots(tables, lens, page)])
    c.free()


def _slots(tables, lens, page=PAGE) -> np.ndarray:
    """Every sequence's key slots in order, concatenated."""
    return np.concatenate([tables[s, np.arange(ln) // page] * page + np.arange(ln) % page
                           for s, ln in enumerate(lens)])


_dumped: list[str] = []


def _dump(name, bq, **arrays) -> None:
    """$AOTX_FLASH_DUMP set: a failing small case's inputs and outputs (K/V of each sequence in key
    order) as .npz there, at most 4, for study off the GPU."""
    where = os.environ.get("AOTX_FLASH_DUMP")
    if not where or len(_dumped) >= 4:
        return
    path = os.path.join(where, f"flash_bq{bq}_{name.replace(' ', '_').replace('/', '-')}.npz")
    np.savez_compressed(path, **arrays)
    _dumped.append(path)
    print(f"  dumped {path}", flush=True)


def _worst(got, ref, qs, positions) -> str:
    """Where a failing output is off: rows never written (non-finite), and the worst (token, head)."""
    bad = ~np.isfinite(got).all(axis=2)
    diff = np.where(np.isfinite(got), np.abs(got - ref), np.inf).max(axis=2)
    t, h = np.unravel_index(int(np.argmax(diff)), diff.shape)
    s = int(np.searchsorted(qs, t, side="right") - 1)
    per_seq = [f"{np.linalg.norm(np.nan_to_num(got[a:b] - ref[a:b], nan=1e9)) / max(np.linalg.norm(ref[a:b]), 1e-30):.1e}"
               for a, b in zip(qs[:-1], qs[1:])]
    return (f"non-finite (token, head) rows={int(bad.sum())}; worst token {t} (seq {s}, position {positions[t]}) "
            f"head {h}: |d|={diff[t, h]:.3g}; rel per seq {per_seq}")


def e2e(bundle, real: bool, record) -> None:
    """ops.gpu.model_check end to end (prefill logits at every position, then decode steps, against the
    numpy backend; on real weights also the greedy France answer through the Engine) with
    AOTX_FLASH_PREFILL=1 whatever the default: every prompt of >= 16 tokens prefills through flash_prefill.
    Names get the prefix "flash "."""
    from ops.gpu import model_check

    old = os.environ.get("AOTX_FLASH_PREFILL")
    os.environ["AOTX_FLASH_PREFILL"] = "1"
    try:
        model_check.run(bundle, real, lambda name, value, thr, extra="": record("flash " + name, value, thr, extra))
    finally:
        if old is None:
            del os.environ["AOTX_FLASH_PREFILL"]
        else:
            os.environ["AOTX_FLASH_PREFILL"] = old


def main() -> int:
    from kernels.cuda.probe import gpu_present
    from ops.gpu.kernel_check import Ctx, rel

    if not gpu_present():
        print("flash_check needs an NVIDIA GPU", file=sys.stderr)
        return 2
    t0 = time.time()
    c = Ctx()
    print(f"device {c.dev.name} {c.dev.arch} sms={c.dev.sm_count}", flush=True)
    check_flash(c, rel)
    return c.summary("flash", t0)


if __name__ == "__main__":
    sys.exit(main())
