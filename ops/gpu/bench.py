"""make gpu-bench: the CUDA backend against HF transformers on the same GPU, same shapes
(SmolLM2-135M), bf16, greedy, a 32-token prompt and exactly 256 new tokens per sequence.

    python -m ops.gpu.bench [--batches 1,16,64,256] [--real] [--hf-budget-s 300]

tok/s = batch * 256 / wall time of the whole generation (prefill included), for us and for HF
`generate` alike. "ours" is the backend's generate loop (StepBatch per step as the runner builds it,
decode steps replayed from CUDA graphs, greedy sampling on the GPU, token ids back to the host each
step). Also: TTFT for a 1,024-token prompt, per-kernel achieved GB/s or TFLOP/s (CUDA events), and
the replay time of one decode graph per batch bucket. Without --real the weights are random (same
shapes and speed; no EOS concerns: HF runs min_new_tokens=256).
"""
from __future__ import annotations

from ops.gpu.fused_bench import graph_seconds

import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("OPENBLAS_NUM_THREADS", "8")

PROMPT_LEN, NEW = 32, 256


def _step_batch(seqs_len, page_size, n_pages_each, tokens, prefill_lens=None):
    from kernels import StepBatch

    b = len(seqs_len)
    tables = (np.arange(b)[:, None] * n_pages_each + np.arange(n_pages_each)[None, :]).astype(np.int32)
    if prefill_lens is None:  # decode: one token per sequence at position len-1
        pos = np.asarray(seqs_len, np.int32) - 1
        slots = tables[np.arange(b), pos // page_size] * page_size + pos % page_size
        return StepBatch(np.asarray(tokens, np.int32), pos, np.arange(b + 1, dtype=np.int32),
                         np.asarray(seqs_len, np.int32), tables, slots.astype(np.int32), np.arange(b, dtype=np.int32))
    n = prefill_lens
    pos = np.tile(np.arange(n, dtype=np.int32), b)
    seq = np.repeat(np.arange(b), n)
    slots = tables[seq, pos // page_size] * page_size + pos % page_size
    return StepBatch(np.asarray(tokens, np.int32).ravel(), pos, (np.arange(b + 1) * n).astype(np.int32),
                     np.full(b, n, np.int32), tables, slots.astype(np.int32),
                     (np.arange(b) * n + n - 1).astype(np.int32))


def ours_generate(backend, prompts: np.ndarray, new: int) -> tuple[float, np.ndarray]:
    from kernels import SamplingRows

    b, n = prompts.shape
    ps = backend.page_size
    n_pages_each = -(-(n + new) // ps)
    greedy = SamplingRows(np.zeros(b, np.float32), np.ones(b, np.float32), np.zeros(b, np.int32),
                          np.zeros(b, np.uint64), np.zeros(b, np.int64))
    out = np.empty((b, new), np.int32)
    t0 = time.perf_counter()
    ids = backend.sample(backend.forward(_step_batch([n] * b, ps, n_pages_each, prompts, n)), greedy)
    out[:, 0] = ids
    for i in range(1, new):
        ids = backend.sample(backend.forward(_step_batch([n + i] * b, ps, n_pages_each, ids)), greedy)
        out[:, i] = ids
    return time.perf_counter() - t0, out


def hf_model(cfg):
    import torch
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM

    hc = HFConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.ffn,
                  num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                  num_key_value_heads=cfg.n_kv_heads, rope_theta=cfg.rope_base, rms_norm_eps=cfg.rms_eps,
                  max_position_embeddings=cfg.context_length, tie_word_embeddings=True,
                  bos_token_id=cfg.bos_id, eos_token_id=cfg.eos_id, pad_token_id=cfg.eos_id)
    torch.manual_seed(0)
    return LlamaForCausalLM(hc).to(device="cuda", dtype=torch.bfloat16).eval()


def hf_generate(model, prompts: np.ndarray, new: int, static: bool) -> float:
    import torch

    ids = torch.tensor(prompts, dtype=torch.long, device="cuda")
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, attention_mask=torch.ones_like(ids))
    if static:
        kw["cache_implementation"] = "static"
    with torch.inference_mode():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(ids, **kw)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    assert out.shape[1] == prompts.shape[1] + new, out.shape
    return dt


def kernel_table(backend) -> list[tuple[str, float, str]]:
    """Per-kernel achieved rates at model shapes (median of repeats, CUDA events)."""
    from kernels.cuda import decode_plan, driver, launchers as L

    cfg, k, st = backend.config, backend.k, backend.dev.stream
    H, F, V = cfg.hidden, cfg.ffn, cfg.vocab_size
    timer = driver.Timer()
    rows = []

    def timed(fn, reps=50):
        return graph_seconds(st, timer, fn, reps)

    w = backend.layers[0]
    shapes = [("qkv", w["wqkv"], backend.qkv_n, H), ("o", w["wo"], H, cfg.q_size),
              ("gate_up", w["wgu"], 2 * F, H), ("down", w["wdown"], H, F), ("lm_head", backend.embed, V, H)]
    for name, wp, n, kk in shapes:
        e = L.epi(L.EPI_STORE, out_f32=backend.logits, ld=n)
        s = timed(lambda: k.gemv(backend.h, 0, 0, 0, 0.0, wp, n, kk, 1, e))
        rows.append((f"linear_gemv {name} [{n}x{kk}] T=1", n * kk * 2 / s / 1e9, "GB/s (weights)"))
        for t in (64, 256):
            s = timed(lambda: k.mma(backend.h, t, wp, n, kk, e))
            rows.append((f"linear_mma {name} [{n}x{kk}] T={t}", 2 * t * n * kk / s / 1e12, "TFLOP/s"))
    ps = backend.page_size
    for b, ctx in ((1, 1024), (64, 1024), (256, 288), (8, 8192)):
        if b * -(-ctx // ps) > backend.num_pages or b > backend.t_cap:
            continue
        npg = -(-ctx // ps)
        tables = (np.arange(b)[:, None] * npg + np.arange(npg)[None, :]).astype(np.int32)
        p = backend._stage(np.zeros(b), np.full(b, ctx - 1), np.full(b, -1), np.arange(b), np.full(b, ctx),
                           np.arange(b), tables, npg)
        keep, backend.decode_mma = backend.decode_mma, None   # paged_attention's own splits (AOTX_DECODE_MMA=0)
        nsplit = backend._nsplit(b, ctx)
        backend.decode_mma = keep
        s = timed(lambda: k.attention(backend.q, backend.k_cache, backend.v_cache, p["tok_seq"], p["positions"],
                                      p["ctx"], p["bt"], npg, ps, backend.scale, b, cfg.n_kv_heads, cfg.n_heads,
                                      cfg.head_dim, nsplit, backend.attn, backend.part_o, backend.part_ml), 20)
        rows.append((f"paged_attention decode B={b} ctx={ctx} splits={nsplit}",
                     b * ctx * cfg.kv_size * 2 * 2 / s / 1e9, "GB/s (K+V)"))
        v = decode_plan.VARIANTS[decode_plan.DEFAULT_VARIANT]   # AOTX_DECODE_MMA's kernel beside it
        ns = decode_plan.nsplit(v, b, ctx, cfg.n_kv_heads, backend.dev.sm_count)
        s = timed(lambda: k.decode_attention(v, backend.q, backend.k_cache, backend.v_cache, p["tok_seq"],
                                             p["positions"], p["ctx"], p["bt"], npg, ps, backend.scale, b,
                                             cfg.n_kv_heads, cfg.n_heads, cfg.head_dim, ns, backend.attn,
                                             backend.part_o, backend.part_ml), 20)
        rows.append((f"decode_attention {v.name} B={b} ctx={ctx} splits={ns}",
                     b * ctx * cfg.kv_size * 2 * 2 / s / 1e9, "GB/s (K+V)"))
    for r in (1, 64):
        s = timed(lambda: k.add_rmsnorm(0, backend.residual, backend.out_norm, backend.h, 0, r, H, cfg.rms_eps))
        rows.append((f"add_rmsnorm T={r}", r * H * 6 / s / 1e9, "GB/s"))
    return rows


def graph_table(backend) -> list[tuple[int, float]]:
    """Replay time of one decode step graph per bucket (context 288)."""
    from kernels.cuda import driver

    out = []
    timer = driver.Timer()
    for b in (1, 16, 64, 256):
        ps = backend.page_size
        batch = _step_batch([288] * b, ps, 18, np.zeros(b, np.int32))
        backend.forward(batch)
        g = backend.last_graph
        timer.start(backend.dev.stream)
        for _ in range(20):
            g.launch(backend.dev.stream)
        out.append((b, timer.stop(backend.dev.stream) / 20))
    return out


def step_breakdown(backend, b: int, ctx: int = 288) -> list[tuple[str, int, float]]:
    """Each op class of one decode step, timed in situ: all of a step's launches of that class (30
    layers' weights, so nothing stays in L2 between them) captured in one graph. (name, count, us)."""
    ps = backend.page_size
    npg = -(-ctx // ps)
    tables = (np.arange(b)[:, None] * npg + np.arange(npg)[None, :]).astype(np.int32)
    pos = np.full(b, ctx - 1, np.int32)
    slots = tables[:, (ctx - 1) // ps] * ps + (ctx - 1) % ps
    p = backend._stage(np.zeros(b), pos, slots, np.arange(b), np.full(b, ctx), np.arange(b), tables, npg)
    return op_classes(backend, backend.plan(b, b, p, npg, backend._nsplit(b, ctx)))


def op_classes(backend, plan) -> list[tuple[str, int, float]]:
    """Each op class of a step's `plan` ((name, launch) pairs, backend.plan) captured alone in a graph,
    median of 5 replays: (name, launches, us)."""
    from kernels.cuda import driver

    groups: dict[str, list] = {}
    for name, fn in plan:
        groups.setdefault(name, []).append(fn)
    timer, st, out = driver.Timer(), backend.dev.stream, []
    for name, fns in groups.items():
        graph = driver.Graph(st, lambda fns=fns: [f() for f in fns])
        graph.launch(st)
        ts = []
        for _ in range(5):
            timer.start(st)
            graph.launch(st)
            ts.append(timer.stop(st))
        out.append((name, len(fns), float(np.median(ts)) * 1e3))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--hf-budget-s", type=float, default=300.0)
    ap.add_argument("--skip-hf", action="store_true")
    args = ap.parse_args(argv)
    batches = [int(x) for x in args.batches.split(",")]
    from kernels import create_backend

    if args.real:
        from kernels import load_model
        bundle = load_model(progress=False)
    else:
        from ops.gpu.model_check import random_bundle
        bundle = random_bundle()
    cfg = bundle.config
    pages_each = -(-(PROMPT_LEN + NEW) // 16)
    from ops.gpu import prefill_bench
    num_pages = max(max(batches) * pages_each, 1024 // 16 + 8, prefill_bench.PAGES) + 16   # its shapes fit
    backend = create_backend("cuda", bundle, num_pages=num_pages, page_size=16)
    print(f"device {backend.dev.name} ({backend.dev.arch}, {backend.dev.sm_count} SMs), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    rng = np.random.default_rng(0)
    ours = {}
    for b in batches:
        prompts = rng.integers(3, cfg.vocab_size, (b, PROMPT_LEN)).astype(np.int32)
        ours_generate(backend, prompts, 8)                 # warm-up: captures this bucket's graphs
        dt, toks = ours_generate(backend, prompts, NEW)
        ours[b] = b * NEW / dt
        print(f"ours batch {b}: {ours[b]:.0f} tok/s ({dt:.3f} s for {b}x{NEW})", flush=True)

    long_prompt = rng.integers(3, cfg.vocab_size, (1, 1024)).astype(np.int32)
    from kernels import SamplingRows
    g1 = SamplingRows(np.zeros(1, np.float32), np.ones(1, np.float32), np.zeros(1, np.int32),
                      np.zeros(1, np.uint64), np.zeros(1, np.int64))
    ttfts = {True: [], False: []}   # step graphs on (the default: replayed from the third step of a shape), off
    keep = backend.step_graphs.enabled
    for _ in range(6):
        for graphs in (True, False):
            backend.step_graphs.enabled = graphs
            t0 = time.perf_counter()
            backend.sample(backend.forward(_step_batch([1024], 16, 64, long_prompt, 1024)), g1)
            ttfts[graphs].append(time.perf_counter() - t0)
    backend.step_graphs.enabled = keep
    ttft, ttft_eager = float(np.median(ttfts[True][1:])), float(np.median(ttfts[False][1:]))
    print(f"TTFT 1024-token prompt: {ttft * 1e3:.2f} ms with its step graph, {ttft_eager * 1e3:.2f} ms launched "
          f"eagerly (AOTX_STEP_GRAPHS=0; alternating, median of 5 after warm-up)", flush=True)
    tt = prefill_bench.print_all(backend, _step_batch)   # flash_prefill against paged_attention, kernels

    graphs = graph_table(backend)
    for b, ms in graphs:
        print(f"decode graph replay batch {b}: {ms * 1e3:.1f} us/step", flush=True)
    for b in (1, 256):
        if b == 1 and backend.fused:   # the same breakdown with the older plan, for comparison
            backend.fused = False
            total = 0.0
            for name, n, us in step_breakdown(backend, b):
                total += us
                print(f"step b=1 AOTX_FUSED=0 {name:<26} x{n:<3} {us:8.1f} us  ({us / n:6.2f} us each)", flush=True)
            print(f"step b=1 AOTX_FUSED=0 sum of op classes {total:.1f} us", flush=True)
            backend.fused = True
        total = 0.0
        for name, n, us in step_breakdown(backend, b):
            total += us
            print(f"step b={b} {name:<26} x{n:<3} {us:8.1f} us  ({us / n:6.2f} us each)", flush=True)
        print(f"step b={b} sum of op classes {total:.1f} us", flush=True)
    kt = kernel_table(backend)
    from ops.gpu import fused_bench
    kt += fused_bench.kernel_rows(backend)
    from ops.gpu import wgmma_bench   # linear_wgmma (AOTX_WGMMA) beside linear_mma, every variant
    kt += wgmma_bench.kernel_rows(backend)
    for name, val, unit in kt:
        print(f"kernel {name:<48} {val:9.1f} {unit}", flush=True)
    for b, label, n, us in fused_bench.step_rows(backend, _step_batch):
        print(f"decode step batch {b} {label:<24}: {us:7.1f} us/step, {n} launches", flush=True)

    hf = {}
    if not args.skip_hf:
        import torch
        import transformers
        print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
        model = hf_model(cfg)
        t_start = time.perf_counter()
        for mode in ("eager", "static+compile"):
            for b in batches:
                if time.perf_counter() - t_start > args.hf_budget_s:
                    print(f"HF {mode} batch {b}: not run (time budget)", flush=True)
                    continue
                prompts = rng.integers(3, cfg.vocab_size, (b, PROMPT_LEN)).astype(np.int64)
                try:
                    hf_generate(model, prompts, 4 if mode == "eager" else NEW, mode != "eager")  # warm-up / compile
                    dt = hf_generate(model, prompts, NEW, mode != "eager")
                    hf[(mode, b)] = b * NEW / dt
                    print(f"HF {mode} batch {b}: {hf[(mode, b)]:.0f} tok/s", flush=True)
                except Exception as exc:
                    print(f"HF {mode} batch {b}: failed: {type(exc).__name__}: {exc}", flush=True)

    print("\n| batch | ours tok/s | HF eager tok/s | ratio | HF static+compile tok/s | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in batches:
        e, c = hf.get(("eager", b)), hf.get(("static+compile", b))
        fmt = lambda v: f"{v:,.0f}" if v else "n/a"  # noqa: E731
        rat = lambda v: f"{ours[b] / v:.1f}x" if v else "n/a"  # noqa: E731
        print(f"| {b} | {ours[b]:,.0f} | {fmt(e)} | {rat(e)} | {fmt(c)} | {rat(c)} |")
    print(f"\nTTFT (1,024-token prompt, prefill + first token): {ttft * 1e3:.2f} ms (eager {ttft_eager * 1e3:.2f}); "
          f"flash_prefill "
          f"{tt[True] * 1e3:.2f} ms against paged_attention {tt[False] * 1e3:.2f} ms in the same process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
