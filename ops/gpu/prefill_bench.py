"""gpu-bench lines for prefill: TTFT of a 1,024-token prompt with flash_prefill and with paged_attention
(the plan before it) in the same process, where a 1,024-token prefill's time goes (each op class of the
step captured alone in a graph), and the prefill attention kernels' achieved TFLOP/s.

    python -m ops.gpu.prefill_bench        (random weights; also called by ops.gpu.bench)

TFLOP/s count the causal work only: 4 * head_dim * n_heads * (keys each query token sees), summed.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ops.gpu.fused_bench import graph_seconds

SHAPES = [("prompt 64", [(64, 64)]), ("prompt 256", [(256, 256)]), ("prompt 1024", [(1024, 1024)]),
          ("8 prompts x 256", [(256, 256)] * 8), ("chunk 2048 of 8192", [(8192, 2048)]),
          ("chunk 64 + 64 decodes, ctx 288", [(288, 64)] + [(288, 1)] * 64)]
PAGES = 65 * 18 + 16   # pages the shapes need (one backend holds each in turn)


def _staged(backend, seqs):
    """Stage a prefill step of `seqs` ((context, query tokens) each; pages contiguous from 0)."""
    from kernels import StepBatch

    ps = backend.page_size
    npg = max(-(-ln // ps) for ln, _ in seqs)
    tables = (np.arange(len(seqs))[:, None] * npg + np.arange(npg)[None, :]).astype(np.int32)
    nq = np.array([n for _, n in seqs])
    pos = np.concatenate([np.arange(ln - n, ln) for ln, n in seqs]).astype(np.int32)
    seq = np.repeat(np.arange(len(seqs)), nq)
    slots = (tables[seq, pos // ps] * ps + pos % ps).astype(np.int32)
    qs = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
    batch = StepBatch(np.zeros(len(pos), np.int32), pos, qs, np.array([ln for ln, _ in seqs], np.int32), tables,
                      slots, qs[1:] - 1)
    return batch, len(seqs) * npg


def kernel_rows(backend) -> list[tuple[str, float, str]]:
    from kernels.cuda import driver, flash_plan, launchers as L
    from kernels.cuda.twins import to_bf16

    cfg, k, st, timer = backend.config, backend.k, backend.dev.stream, driver.Timer()
    rng = np.random.default_rng(0)
    slots = backend.num_pages * backend.page_size
    for cache in (backend.k_cache, backend.v_cache):   # layer 0: finite values
        driver.htod(cache, to_bf16(rng.standard_normal((slots, cfg.kv_size)).astype(np.float32)), st)
    driver.htod(backend.q, rng.standard_normal((backend.t_cap, cfg.q_size)).astype(np.float32), st)
    rows = []
    for name, seqs in SHAPES:
        batch, pages = _staged(backend, seqs)
        t = batch.num_tokens
        if pages > backend.num_pages or t > backend.t_cap:
            rows.append((f"prefill attention {name}: does not fit this backend's pool", 0.0, ""))
            continue
        flops = 4.0 * cfg.head_dim * cfg.n_heads * float((batch.positions.astype(np.int64) + 1).sum())
        qs = np.asarray(batch.query_start)
        picked = flash_plan.variant(qs, cfg.n_kv_heads, backend.dev.sm_count)
        keep = k.flash_stages
        for (bq, ks), stages in [(v, s_) for v in flash_plan.VARIANTS for s_ in L.FLASH_STAGES]:
            k.flash_stages = stages
            tiles = flash_plan.tiles(qs, batch.positions, batch.context_lens, bq)
            p = backend._stage(batch.token_ids, batch.positions, batch.slot_mapping,
                               np.repeat(np.arange(batch.num_seqs), np.diff(qs)), batch.context_lens,
                               batch.logits_rows, batch.block_tables, batch.block_tables.shape[1], tiles)
            s = graph_seconds(st, timer, lambda p=p, tiles=tiles, bq=bq, ks=ks: k.flash_attention(
                backend.q, backend.k_cache, backend.v_cache, p["tiles"], len(tiles), bq, ks, p["tok_seq"],
                p["positions"], p["ctx"], p["bt"], batch.block_tables.shape[1], backend.page_size, backend.scale,
                cfg.n_kv_heads, backend.attn), reps=20)
            mark = " (picked)" if (bq, ks) == picked and stages == keep else ""
            rows.append((f"flash_prefill bq={bq} ks={ks} stages={stages} {name}{mark}", flops / s / 1e12,
                         f"TFLOP/s, {s * 1e6:.1f} us"))
        k.flash_stages = keep
        nsplit = backend._nsplit(t, int(batch.context_lens.max()))
        s = graph_seconds(st, timer, lambda p=p, nsplit=nsplit: k.attention(
            backend.q, backend.k_cache, backend.v_cache, p["tok_seq"], p["positions"], p["ctx"], p["bt"],
            batch.block_tables.shape[1], backend.page_size, backend.scale, t, cfg.n_kv_heads, cfg.n_heads,
            cfg.head_dim, nsplit, backend.attn, backend.part_o, backend.part_ml), reps=20)
        rows.append((f"paged_attention {name} splits={nsplit}", flops / s / 1e12, f"TFLOP/s, {s * 1e6:.1f} us"))
    return rows


def ttft(backend, step_batch, n: int = 1024, repeats: int = 6) -> dict:
    """Seconds to the first token of an n-token prompt (prefill + GPU sampling, launched as the engine does),
    median of repeats - 1 after a warm-up each, three ways alternating: True flash_prefill and False
    paged_attention, each with the backend's step graphs (kernels/cuda/step_graphs.py: from the third step
    of a shape on, its graph is replayed), and "flash eager" (flash_prefill, step graphs off: every launch
    from Python, as a shape's first step)."""
    from kernels import SamplingRows

    g1 = SamplingRows(np.zeros(1, np.float32), np.ones(1, np.float32), np.zeros(1, np.int32),
                      np.zeros(1, np.uint64), np.zeros(1, np.int64))
    prompt = np.random.default_rng(1).integers(3, backend.config.vocab_size, (1, n)).astype(np.int32)
    npg = -(-n // backend.page_size)
    modes = {False: (False, True), True: (True, True), "flash eager": (True, False)}   # (flash, step graphs)
    times: dict = {m: [] for m in modes}
    keep = backend.flash, backend.step_graphs.enabled
    try:
        for _ in range(repeats):
            for mode, (flash, graphs) in modes.items():
                backend.flash, backend.step_graphs.enabled = flash, graphs
                t0 = time.perf_counter()
                backend.sample(backend.forward(step_batch([n], backend.page_size, npg, prompt, n)), g1)
                times[mode].append(time.perf_counter() - t0)
    finally:
        backend.flash, backend.step_graphs.enabled = keep
    return {m: float(np.median(v[1:])) for m, v in times.items()}


def breakdown(backend, n: int = 1024) -> dict[bool, list[tuple[str, int, float]]]:
    """Each op class of an n-token prefill step, captured alone in a graph (its 30 launches), median
    of 5 replays: (name, launches, us), with flash on and off."""
    from ops.gpu.bench import op_classes

    out = {}
    keep = backend.flash
    try:
        for flash in (False, True):
            backend.flash = flash
            batch, _ = _staged(backend, [(n, n)])
            p, width, nsplit = backend.stage(batch)
            out[flash] = op_classes(backend, backend.plan(n, 1, p, width, nsplit))
    finally:
        backend.flash = keep
    return out


def print_all(backend, step_batch) -> dict:
    tt = ttft(backend, step_batch)
    print(f"TTFT 1024-token prompt: flash_prefill {tt[True] * 1e3:.2f} ms, paged_attention {tt[False] * 1e3:.2f} ms "
          f"(step graphs {'on' if backend.step_graphs.enabled else 'off'}); flash_prefill with every launch eager "
          f"{tt['flash eager'] * 1e3:.2f} ms (same process, alternating, median of 5 after a warm-up)", flush=True)
    for flash, rows in breakdown(backend).items():
        label = "flash_prefill" if flash else "paged_attention"
        for name, n, us in rows:
            print(f"prefill 1024 ({label}) {name:<22} x{n:<3} {us:8.1f} us", flush=True)
        print(f"prefill 1024 ({label}) sum of op classes {sum(r[2] for r in rows):.1f} us", flush=True)
    for name, val, unit in kernel_rows(backend):
        print(f"kernel {name:<48} {val:9.2f} {unit}", flush=True)
    return tt


def main() -> int:
    from kernels import create_backend
    from ops.gpu.bench import _step_batch
    from ops.gpu.model_check import random_bundle

    backend = create_backend("cuda", random_bundle(), num_pages=PAGES, page_size=16)
    print(f"device {backend.dev.name} ({backend.dev.arch}, {backend.dev.sm_count} SMs), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    print_all(backend, _step_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
