"""End to end: CUDA backend logits against the numpy backend's on 20 prompts (every prompt
position, then batched and single decode steps through the CUDA graphs), and greedy chat through
the Engine on the CUDA backend. Thresholds: cosine >= 0.99 per row, top-1 agreement >= 95%."""
from __future__ import annotations

import asyncio

import numpy as np

from kernels import StepBatch, create_backend
from kernels.config import LlamaConfig
from kernels.gguf_loader import ModelBundle

PROMPTS = [
    "What is the capital of France?", "Write a haiku about the sea.", "Explain photosynthesis simply.",
    "List three prime numbers.", "Who wrote Hamlet?", "Translate 'good morning' to Spanish.",
    "What is 12 times 7?", "Describe a cat in one sentence.", "Why is the sky blue?",
    "Give me a recipe for pancakes.", "What does a CPU do?", "Name the planets of the solar system.",
    "How do airplanes fly?", "Tell me a joke about computers.", "What is the boiling point of water?",
    "Summarise the plot of Cinderella.", "What is machine learning?", "How many legs does a spider have?",
    "Suggest a name for a puppy.", "What year did the first moon landing happen?",
]


def random_bundle(seed: int = 0) -> ModelBundle:
    """SmolLM2-135M shapes with random weights (for checking the forward before real weights arrive)."""
    cfg = LlamaConfig(n_layers=30, hidden=576, ffn=1536, n_heads=9, n_kv_heads=3, head_dim=64,
                      rope_base=100000.0, rms_eps=1e-5, vocab_size=49152, context_length=8192, bos_id=1, eos_id=2)
    rng = np.random.default_rng(seed)
    r = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)  # noqa: E731
    emb = r(cfg.vocab_size, cfg.hidden)
    w = {"token_embd.weight": emb, "lm_head.weight_t": np.ascontiguousarray(emb.T),
         "output_norm.weight": 1 + r(cfg.hidden)}
    for i in range(cfg.n_layers):
        p = f"blk.{i}."
        w.update({p + "attn_norm.weight": 1 + r(cfg.hidden), p + "ffn_norm.weight": 1 + r(cfg.hidden),
                  p + "attn_qkv.weight_t": r(cfg.hidden, cfg.q_size + 2 * cfg.kv_size),
                  p + "attn_output.weight_t": r(cfg.q_size, cfg.hidden),
                  p + "ffn_gate_up.weight_t": r(cfg.hidden, 2 * cfg.ffn),
                  p + "ffn_down.weight_t": r(cfg.ffn, cfg.hidden)})
    return ModelBundle(config=cfg, weights=w, tokenizer=None, chat_template=None, path=None, sha256="random")


def _batch(seqs, page_size, first_page, n_new, all_rows):
    """seqs: list of (token ids so far); the last n_new[s] of each run this step. Pages are contiguous
    per sequence starting at first_page[s]."""
    tok, pos, slots, qs, ctx, rows = [], [], [], [0], [], []
    width = max(-(-len(s) // page_size) for s in seqs)
    tables = np.full((len(seqs), width), -1, np.int32)
    for i, s in enumerate(seqs):
        n = n_new[i]
        start = len(s) - n
        pages = first_page[i] + np.arange(-(-len(s) // page_size))
        tables[i, :len(pages)] = pages
        for p in range(start, len(s)):
            tok.append(s[p]); pos.append(p)
            slots.append(int(pages[p // page_size]) * page_size + p % page_size)
            if all_rows or p == len(s) - 1:
                rows.append(len(tok) - 1)
        qs.append(len(tok)); ctx.append(len(s))
    a = lambda x: np.array(x, np.int32)  # noqa: E731
    return StepBatch(a(tok), a(pos), a(qs), a(ctx), tables, a(slots), a(rows))


def compare(ref: np.ndarray, got: np.ndarray) -> tuple[float, float]:
    cos = (ref * got).sum(-1) / (np.linalg.norm(ref, axis=-1) * np.linalg.norm(got, axis=-1))
    top1 = float((ref.argmax(-1) == got.argmax(-1)).mean())
    return float(cos.min()), top1


def logits_check(bundle, prompts: list[list[int]], record) -> None:
    page = 16
    per = 64
    num_pages = per * (len(prompts) + 1)
    npb = create_backend("numpy", bundle, num_pages=num_pages, page_size=page)
    cub = create_backend("cuda", bundle, num_pages=num_pages, page_size=page)
    first = [i * per for i in range(len(prompts))]
    refs, gots = [], []
    for i, p in enumerate(prompts):  # prefill each prompt alone, logits at every position
        b = _batch([p], page, [first[i]], [len(p)], True)
        refs.append(npb.forward(b)); gots.append(np.asarray(cub.forward(b)))
    ref, got = np.concatenate(refs), np.concatenate(gots)
    cmin, top1 = compare(ref, got)
    record("e2e prefill logits (20 prompts, all positions) cos_min", cmin, 0.99, top1)
    seqs = [list(p) for p in prompts]
    nxt = ref_next = [int(r[-1].argmax()) for r in refs]
    for step in range(3):  # batched decode (graph, mma path: 20 -> bucket 32)
        seqs = [s + [t] for s, t in zip(seqs, nxt)]
        b = _batch(seqs, page, first, [1] * len(seqs), False)
        r_np, r_cu = npb.forward(b), np.asarray(cub.forward(b))
        cmin, top1 = compare(r_np, r_cu)
        record(f"e2e decode batch {len(seqs)} step {step} cos_min", cmin, 0.99, top1)
        nxt = [int(x) for x in r_np.argmax(-1)]
    for step in range(2):  # batch 8 decode (graph, the fused T <= 8 plan with attn_o_fused: fused_policy)
        seqs[:8] = [s + [t] for s, t in zip(seqs[:8], nxt[:8])]
        b = _batch(seqs[:8], page, first[:8], [1] * 8, False)
        r_np, r_cu = npb.forward(b), np.asarray(cub.forward(b))
        cmin, top1 = compare(r_np, r_cu)
        record(f"e2e decode batch 8 step {step} cos_min", cmin, 0.99, top1)
        nxt = [int(x) for x in r_np.argmax(-1)] + list(nxt[8:])
    s0 = seqs[0]
    for step in range(3):  # single-sequence decode (graph, gemv path)
        s0 = s0 + [nxt[0]]
        b = _batch([s0], page, [first[0]], [1], False)
        r_np, r_cu = npb.forward(b), np.asarray(cub.forward(b))
        cmin, top1 = compare(r_np, r_cu)
        record(f"e2e decode batch 1 step {step} cos_min", cmin, 0.99, top1)
        nxt = [int(r_np.argmax(-1)[0])]
    del ref_next


async def france(bundle) -> str:
    from aotx.engine import Engine, EngineConfig, SamplingParams

    backend = create_backend("cuda", bundle, num_pages=256, page_size=16)
    engine = Engine(backend, bundle.tokenizer, EngineConfig(max_batch=8, num_pages=256, page_size=16))
    engine.start()
    try:
        chat = bundle.chat_template.render([{"role": "user", "content": "What is the capital of France?"}],
                                           add_generation_prompt=True)
        ids = []
        async for d in engine.submit(bundle.tokenizer.encode(chat), SamplingParams(max_tokens=24, temperature=0)):
            ids.extend(d.token_ids)
        return bundle.tokenizer.decode(ids)
    finally:
        await engine.stop()


def run(bundle, real: bool, record) -> None:
    if real:
        tok = bundle.tokenizer
        prompts = [tok.encode(bundle.chat_template.render([{"role": "user", "content": p}],
                                                          add_generation_prompt=True)) for p in PROMPTS]
    else:
        rng = np.random.default_rng(5)
        prompts = [list(rng.integers(3, bundle.config.vocab_size, int(rng.integers(5, 60)))) for _ in PROMPTS]
    logits_check(bundle, prompts, record)
    if real:
        text = asyncio.run(france(bundle))
        print(f"greedy answer: {text!r}", flush=True)
        record("greedy France -> Paris", 0.0 if "Paris" in text else 1.0, 0.0, text)
