"""How far decode_attention's tensor-core roundings move the real model, on the CPU (numpy, the real GGUF): a
study of the options for q and P (the softmax numerators), each through the kernel's numpy twin
(kernels.cuda.decode_attention_twin, the default variant's walk: 2 warps, 16-key tiles, no split):

* ``scalar f32``: kernels.ops_attention.paged_attention (attention.cu's maths: q, scores and P in float32);
* ``bf16``: q and P one bf16 each (session 11's kernel; now the _bf16 peer variant);
* ``split q``: q as bf16 hi + lo, P one bf16;
* ``split q+P``: both as bf16 hi + lo (session 12's kernel: the M tile's padding rows carry the lo halves);
* ``fp16``: q and P one fp16 each (an f16 mma with K/V converted after ldmatrix; not built);
* ``f32 walk``: the twin's walk with no rounding of q and P (the control: what the walk's order of sums and the
  output's bf16 rounding alone do; no tensor-core path can do better).

The K/V cache holds bf16 values (as on the GPU) and every attention output is rounded to bf16 (both GPU paths
write bf16). Prompts are prefilled with the reference attention; then ``--batch`` sequences decode ``--steps``
steps together. The scalar run decodes greedily; every other option is forced along the scalar run's tokens
(its own K/V cache, its own hidden states), so each step's logits compare one to one.

Two tables: (1) attention outputs, before their bf16 rounding, against a float64 reference on the scalar run's
inputs (every layer of every ``--attn-every``-th step): max |d| and ||d|| / ||ref||; (2) each option's logits
against the scalar path's: mean / max of 1 - cosine, top-1 agreement, mean / max |d|; with --free (3) each option
greedy on its own: requests whose tokens all equal the scalar path's.

    python -m ops.gpu.decode_attention_precision [--batch 8] [--steps 40] [--attn-every 8] [--free]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from kernels import ops_attention
from kernels.cuda.decode_attention_twin import decode_attention, one_bf16, split_bf16
from kernels.cuda.twins import round_bf16
from kernels.kv_cache import PagedKVCache
from kernels.step_batch import StepBatch

PROMPTS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain photosynthesis to a child in three sentences.",
    "List five prime numbers and say why they are prime.",
    "How do I reverse a list in Python?",
    "What causes the seasons on Earth?",
    "Give me a recipe for pancakes.",
    "Summarise the plot of Romeo and Juliet.",
    "Why is the sky blue?",
    "Translate 'good morning' into French, Spanish and German.",
    "What is the difference between a virus and a bacterium?",
    "Describe a sunset over the mountains.",
    "How many legs does a spider have, and why?",
    "Tell me a joke about computers.",
    "What are the three states of matter?",
    "Explain what a black hole is.",
]
WARPS, KEYS = 2, 16   # decode_plan.DEFAULT_VARIANT's walk


def one_fp16(x: np.ndarray) -> list[np.ndarray]:
    return [x.astype(np.float16).astype(np.float32)]


def exact(x: np.ndarray) -> list[np.ndarray]:
    return [x]


OPTIONS = {"scalar f32": None, "f32 walk": (exact, exact), "bf16": (one_bf16, one_bf16),
           "split q": (split_bf16, one_bf16), "split q+P": (split_bf16, split_bf16), "fp16": (one_fp16, one_fp16)}


def _reference64(q, kc, vc, positions, context_lens, block_tables, page, scale):
    return ops_attention.paged_attention_decode(q.astype(np.float64), kc.astype(np.float64),
                                                vc.astype(np.float64), positions, context_lens, block_tables,
                                                page, scale)


class Study:
    def __init__(self, bundle, batch: int, page: int = 16):
        from kernels.model import LlamaModel

        self.cfg = bundle.config
        self.model = LlamaModel(bundle.config, bundle.weights)
        self.page = page
        tok, tpl = bundle.tokenizer, bundle.chat_template
        self.prompts = [tok.encode(tpl.render([{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]))
                        for i in range(batch)]
        self.attn_err = {name: [] for name in OPTIONS}   # (max |d|, rel) per call, on the scalar run's inputs
        self.kv_max = 0.0

    def run(self, option: str, steps: int, forced=None, attn_every: int = 0):
        """Prefill (reference attention) then ``steps`` decode steps with ``option``'s attention: (tokens [steps,
        B], logits [steps, B, V]). ``forced``: the tokens to feed (else greedy)."""
        import kernels.model as km

        cfg, page, batch = self.cfg, self.page, len(self.prompts)
        width = -(-(max(map(len, self.prompts)) + steps + 1) // page)
        kv = PagedKVCache.for_config(cfg, batch * width, page)
        tables = np.arange(batch * width, dtype=np.int32).reshape(batch, width)
        lens = np.array([len(p) for p in self.prompts], np.int32)
        state = {"decode": False, "step": 0}

        def kv_write(kc, vc, k, v, slots):   # the GPU cache holds bf16
            self.kv_max = max(self.kv_max, float(np.abs(k).max()), float(np.abs(v).max()))
            ops_attention.kv_write(kc, vc, round_bf16(k), round_bf16(v), slots)

        def attention(q, kc, vc, positions, query_start, context_lens, block_tables, page_size, scale):
            if not state["decode"] or OPTIONS[option] is None:
                out = ops_attention.paged_attention(q, kc, vc, positions, query_start, context_lens, block_tables,
                                                    page_size, scale)
            else:
                out = decode_attention(q, kc, vc, np.arange(len(q), dtype=np.int32), positions, context_lens,
                                       block_tables, page_size, scale, WARPS, KEYS, 1, rounding=OPTIONS[option])
            if state["decode"] and attn_every and state["step"] % attn_every == 0:
                ref = _reference64(q, kc, vc, positions, context_lens, block_tables, page_size, scale)
                for name, rounding in OPTIONS.items():
                    got = (ops_attention.paged_attention(q, kc, vc, positions, query_start, context_lens,
                                                         block_tables, page_size, scale) if rounding is None else
                           decode_attention(q, kc, vc, np.arange(len(q), dtype=np.int32), positions, context_lens,
                                            block_tables, page_size, scale, WARPS, KEYS, 1, rounding=rounding,
                                            round_out=False))
                    d = got.astype(np.float64) - ref
                    self.attn_err[name].append((float(np.abs(d).max()), float(np.linalg.norm(d) / np.linalg.norm(ref))))
            return round_bf16(out.astype(np.float32))

        saved = km.kv_write, km.paged_attention
        km.kv_write, km.paged_attention = kv_write, attention
        try:
            ids = np.concatenate(self.prompts).astype(np.int32)
            qs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
            pos = np.concatenate([np.arange(n) for n in lens]).astype(np.int32)
            slots = np.concatenate([tables[s, np.arange(n) // page] * page + np.arange(n) % page
                                    for s, n in enumerate(lens)]).astype(np.int32)
            logits = self.model.forward(StepBatch(ids, pos, qs, lens.copy(), tables, slots, qs[1:] - 1), kv)
            toks, all_logits = [], []
            state["decode"] = True
            for step in range(steps):
                nxt = forced[step] if forced is not None else logits.argmax(axis=1).astype(np.int32)
                toks.append(nxt)
                pos = lens.copy()
                lens = lens + 1
                slots = (tables[np.arange(batch), pos // page] * page + pos % page).astype(np.int32)
                state["step"] = step
                logits = self.model.forward(StepBatch(nxt.astype(np.int32), pos, np.arange(batch + 1, dtype=np.int32),
                                                      lens.copy(), tables, slots, np.arange(batch, dtype=np.int32)), kv)
                all_logits.append(logits)
            return np.array(toks), np.array(all_logits)
        finally:
            km.kv_write, km.paged_attention = saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--attn-every", type=int, default=8)
    ap.add_argument("--free", action="store_true", help="(3): each option greedy on its own, against the scalar "
                    "path's tokens (requests identical; the engine check's measure)")
    args = ap.parse_args(argv)
    from kernels import load_model

    t0 = time.time()
    study = Study(load_model(progress=False), args.batch)
    print(f"batch {args.batch}, steps {args.steps}, prompt tokens {[len(p) for p in study.prompts]}", flush=True)
    toks, base = study.run("scalar f32", args.steps, attn_every=args.attn_every)
    forced = toks   # toks[i]: the token fed at step i (the scalar run's greedy choice)
    print(f"K/V max |x| seen: {study.kv_max:.1f} (fp16 max 65504)  [{time.time() - t0:.0f} s]", flush=True)
    calls = len(study.attn_err["bf16"])
    print(f"(1) attention output vs float64, {calls} calls (B={args.batch}, every {args.attn_every}th step, "
          "all layers):")
    for name, errs in study.attn_err.items() if calls else ():
        e = np.array(errs)
        print(f"  {name:<12} max|d| {e[:, 0].max():.2e}  rel mean {e[:, 1].mean():.2e} max {e[:, 1].max():.2e}")
    print(f"(2) logits vs the scalar path, {args.steps} steps x {args.batch} sequences (forced along its tokens):")
    for name in OPTIONS:
        if OPTIONS[name] is None:
            continue
        _, lg = study.run(name, args.steps, forced=forced)
        a, b = lg.reshape(-1, lg.shape[-1]).astype(np.float64), base.reshape(-1, base.shape[-1]).astype(np.float64)
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        top1 = float(np.mean(a.argmax(1) == b.argmax(1)))
        print(f"  {name:<12} 1-cos mean {1 - cos.mean():.2e} max {1 - cos.min():.2e}  top1 {top1:.4f} "
              f"({int(round((1 - top1) * len(a)))}/{len(a)} differ)  |d| mean {np.abs(a - b).mean():.2e} "
              f"max {np.abs(a - b).max():.2e}  [{time.time() - t0:.0f} s]", flush=True)
    if args.free:
        print(f"(3) greedy on its own, {args.steps} tokens x {args.batch} requests, against the scalar path's tokens:")
        for name in OPTIONS:
            if OPTIONS[name] is None:
                continue
            own, _ = study.run(name, args.steps)
            same = [i for i in range(args.batch) if np.array_equal(own[:, i], toks[:, i])]
            first = {i: int(np.argmax(own[:, i] != toks[:, i])) for i in range(args.batch) if i not in same}
            print(f"  {name:<12} {len(same)}/{args.batch} identical; first differences (request: token) {first}  "
                  f"[{time.time() - t0:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
