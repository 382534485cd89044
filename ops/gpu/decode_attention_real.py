"""decode_attention on the real model's inputs: every layer's q and bf16 K/V cache at one decode step of the
model's 20 prompts (numpy model, real GGUF), and how many of the kernel's bf16 outputs differ from the scalar
path's (paged_attention, float32 throughout, then bf16). A measure that does not go through the model's chaotic
amplification (ops/gpu/decode_attention_check.same_batches does): with q and P split into bf16 hi + lo, the walk
is ~5e-6 from float64 and only outputs that sit near a bf16 rounding boundary differ; with one bf16 each
(session 11) the walk is ~3e-3 away and a large share of the outputs differ.

``layer_inputs`` captures the inputs (CPU); ``compare_bits`` is the measure; the CPU side (the twin, in
tests/kernels_cuda/test_decode_attention_real.py and ``main``) and the GPU side (decode_attention_check.real_inputs)
use both.

    python -m ops.gpu.decode_attention_real      # the twin's figures on the CPU
"""
from __future__ import annotations

import sys

import numpy as np

from kernels import ops_attention
from kernels.cuda.twins import round_bf16, to_bf16
from kernels.kv_cache import PagedKVCache
from kernels.step_batch import StepBatch

PAGE = 16


def layer_inputs(bundle, prompts: list[list[int]]):
    """The numpy model on ``prompts`` (prefilled together), then one greedy decode step of all of them; the K/V
    cache holds bf16 values (as on the GPU). Returns (per layer [(q [S, H, D] float32, k_cache, v_cache)],
    positions [S], context_lens [S], block_tables [S, P], scale) of the decode step."""
    import kernels.model as km

    cfg = bundle.config
    model = km.LlamaModel(cfg, bundle.weights)
    s_count = len(prompts)
    lens = np.array([len(p) for p in prompts], np.int32)
    width = -(-(int(lens.max()) + 1) // PAGE)
    kv = PagedKVCache.for_config(cfg, s_count * width, PAGE)
    tables = np.arange(s_count * width, dtype=np.int32).reshape(s_count, width)
    captured, capture = [], [False]

    def kv_write(kc, vc, k, v, slots):
        ops_attention.kv_write(kc, vc, round_bf16(k), round_bf16(v), slots)

    def attention(q, kc, vc, positions, query_start, context_lens, block_tables, page_size, scale):
        if capture[0]:
            captured.append((q.copy(), kc.copy(), vc.copy()))
        return ops_attention.paged_attention(q, kc, vc, positions, query_start, context_lens, block_tables,
                                             page_size, scale)

    saved = km.kv_write, km.paged_attention
    km.kv_write, km.paged_attention = kv_write, attention
    try:
        ids = np.concatenate(prompts).astype(np.int32)
        qs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        pos = np.concatenate([np.arange(n) for n in lens]).astype(np.int32)
        slots = np.concatenate([tables[s, np.arange(n) // PAGE] * PAGE + np.arange(n) % PAGE
                                for s, n in enumerate(lens)]).astype(np.int32)
        logits = model.forward(StepBatch(ids, pos, qs, lens.copy(), tables, slots, qs[1:] - 1), kv)
        nxt = logits.argmax(axis=1).astype(np.int32)
        pos = lens.copy()
        lens = lens + 1
        slots = (tables[np.arange(s_count), pos // PAGE] * PAGE + pos % PAGE).astype(np.int32)
        capture[0] = True
        model.forward(StepBatch(nxt, pos, np.arange(s_count + 1, dtype=np.int32), lens.copy(), tables, slots,
                                np.arange(s_count, dtype=np.int32)), kv)
    finally:
        km.kv_write, km.paged_attention = saved
    return captured, pos, lens, tables, model.scale


def compare_bits(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(the share of bf16 outputs whose bits differ, ||got - ref|| / ||ref||): both float32 of bf16 values."""
    diff = float(np.mean(to_bf16(got) != to_bf16(ref)))
    return diff, float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def scalar_bf16(q, kc, vc, positions, context_lens, tables, scale) -> np.ndarray:
    """The scalar path's output on the CPU: paged_attention in float32, rounded to bf16 (attention.cu's)."""
    qs = np.arange(len(q) + 1, dtype=np.int32)
    return round_bf16(ops_attention.paged_attention(q, kc, vc, positions, qs, context_lens, tables, PAGE, scale))


def twin_figures(bundle, prompts) -> dict[str, tuple[float, float]]:
    """The twin's split and single-bf16 walks (the default variant's shape) against the scalar path on every
    layer's real inputs: {name: (share of differing outputs, relative error)} over all layers together."""
    from kernels.cuda import decode_plan
    from kernels.cuda.decode_attention_twin import decode_attention

    layers, pos, lens, tables, scale = layer_inputs(bundle, prompts)
    ts = np.arange(len(pos), dtype=np.int32)
    ref, got = [], {True: [], False: []}
    v = decode_plan.VARIANTS[decode_plan.DEFAULT_VARIANT]
    for q, kc, vc in layers:
        ref.append(scalar_bf16(q, kc, vc, pos, lens, tables, scale))
        for split in (True, False):
            got[split].append(decode_attention(q, kc, vc, ts, pos, lens, tables, PAGE, scale, v.warps, v.keys, 1,
                                               split))
    ref_all = np.concatenate(ref)
    return {("split" if k else "bf16"): compare_bits(np.concatenate(g), ref_all) for k, g in got.items()}


def real_prompts(bundle) -> list[list[int]]:
    from ops.gpu.model_check import PROMPTS

    render = bundle.chat_template.render
    return [bundle.tokenizer.encode(render([{"role": "user", "content": p}], add_generation_prompt=True))
            for p in PROMPTS]


def main() -> int:
    from kernels import load_model

    bundle = load_model(progress=False)
    for name, (diff, rel) in twin_figures(bundle, real_prompts(bundle)).items():
        print(f"twin {name:<6} vs the scalar path, 30 layers x 20 decode tokens: {diff:.4f} of the bf16 outputs "
              f"differ, relative error {rel:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
