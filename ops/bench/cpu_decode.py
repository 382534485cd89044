"""CPU decode/prefill throughput through the Engine (a benchmark, not a test).

    .venv/bin/python -m ops.bench.cpu_decode [--tokens 64] [--batches 1,4,16,64]

Greedy, one fixed prompt, every request of a batch submitted together;
decode tok/s counts tokens after each request's first one, over the time
from the last first token to the end. Prefill tok/s runs a ~512-token prompt
with max_tokens=0. If llama-cpp-python is importable, the same GGUF runs
through it (2 threads, batch 1) for comparison. Prints a markdown table.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from aotx.engine import Engine, EngineConfig, SamplingParams  # noqa: E402
from kernels import create_backend, default_model_path, load_model  # noqa: E402

PROMPT = "Write a long, detailed story about a dragon who learns to bake bread."
FILLER = ("The history of bread begins in the Neolithic era, when people first ground grain "
          "between stones, mixed it with water and baked the paste on hot rocks. ")


def progress(label: str, done: int, total: int, final: bool = False) -> None:
    sys.stderr.write(f"\r[cpu_decode] {label}: {done}/{total} tokens" + ("\n" if final else "   "))
    sys.stderr.flush()


async def decode_run(engine: Engine, prompt: list[int], batch: int, tokens: int) -> dict:
    params = SamplingParams(max_tokens=tokens, temperature=0)
    start = time.perf_counter()
    handles = [engine.submit(prompt, params) for _ in range(batch)]
    first: list[float] = []
    counts = [0] * batch
    label = f"decode batch {batch}"

    async def consume(i: int, handle) -> None:
        async for delta in handle:
            if delta.token_ids and counts[i] == 0:
                first.append(time.perf_counter())
            counts[i] += len(delta.token_ids)
            if i == 0:
                progress(label, sum(counts), batch * tokens)

    await asyncio.gather(*(consume(i, h) for i, h in enumerate(handles)))
    end = time.perf_counter()
    progress(label, sum(counts), batch * tokens, final=True)
    decode_tokens = sum(counts) - batch
    decode_time = end - max(first)
    return {"batch": batch, "tokens": sum(counts), "ttft_s": max(first) - start,
            "decode_tok_s": decode_tokens / decode_time if decode_time > 0 else float("nan"),
            "wall_s": end - start}


async def prefill_run(engine: Engine, prompt: list[int]) -> float:
    start = time.perf_counter()
    async for _ in engine.submit(prompt, SamplingParams(max_tokens=0)):
        pass
    return len(prompt) / (time.perf_counter() - start)


def llama_cpp_run(prompt_text: str, long_prompt: list[int], tokens: int) -> dict | None:
    try:
        import llama_cpp
    except ImportError as exc:
        print(f"llama-cpp-python not importable ({exc})", file=sys.stderr)
        return None
    llm = llama_cpp.Llama(model_path=str(default_model_path()), n_threads=2, n_ctx=2048,
                          n_batch=512, verbose=False)
    stamps = []
    for _ in llm.create_completion(prompt_text, max_tokens=tokens, temperature=0.0, stream=True):
        stamps.append(time.perf_counter())
    decode = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
    llm.reset()
    start = time.perf_counter()
    llm.eval(long_prompt)          # same GGUF vocabulary: our token ids are llama.cpp's
    prefill = len(long_prompt) / (time.perf_counter() - start)
    return {"decode_tok_s": decode, "prefill_tok_s": prefill, "tokens": len(stamps)}


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--prefill-tokens", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per measurement; the best is reported (a shared box is noisy)")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]

    t0 = time.perf_counter()
    bundle = load_model(progress=False)
    tok = bundle.tokenizer
    print(f"model loaded in {time.perf_counter() - t0:.1f} s; "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}", file=sys.stderr)
    chat = bundle.chat_template.render([{"role": "user", "content": PROMPT}], add_generation_prompt=True)
    prompt = tok.encode(chat)
    long_prompt = tok.encode(FILLER * (args.prefill_tokens // 20 + 8))[: args.prefill_tokens]

    page_size = 16
    per_seq = -(-(len(prompt) + args.tokens) // page_size)
    num_pages = max(max(batches) * per_seq, -(-len(long_prompt) // page_size)) + 8
    backend = create_backend("numpy", bundle, num_pages=num_pages, page_size=page_size)
    engine = Engine(backend, tok, EngineConfig(max_batch=max(batches), num_pages=num_pages,
                                               page_size=page_size, max_model_len=4096))
    engine.start()
    try:
        await decode_run(engine, prompt, 1, 4)                         # warm-up
        rows = []
        for b in batches:
            runs = [await decode_run(engine, prompt, b, args.tokens) for _ in range(args.repeat)]
            rows.append(max(runs, key=lambda r: r["decode_tok_s"]))
        await prefill_run(engine, long_prompt[:64])                    # warm-up
        prefill = max([await prefill_run(engine, long_prompt) for _ in range(args.repeat)])
        print(f"prefill {len(long_prompt)} tokens: {prefill:.1f} tok/s", file=sys.stderr)
    finally:
        await engine.stop()

    ref = None
    try:
        ref = llama_cpp_run(chat, long_prompt, args.tokens)
    except Exception as exc:  # the comparison is optional; report why it failed
        print(f"llama-cpp-python run failed: {type(exc).__name__}: {exc}", file=sys.stderr)

    print(f"\n## CPU decode (numpy backend, {args.tokens} new tokens/request, greedy)\n")
    print("| batch | tokens | TTFT s | decode tok/s | per-request tok/s |"
          + (" vs llama.cpp b1 |" if ref else ""))
    print("|---:|---:|---:|---:|---:|" + ("---:|" if ref else ""))
    for r in rows:
        line = (f"| {r['batch']} | {r['tokens']} | {r['ttft_s']:.2f} | {r['decode_tok_s']:.1f} | "
                f"{r['decode_tok_s'] / r['batch']:.1f} |")
        if ref:
            line += f" {r['decode_tok_s'] / ref['decode_tok_s']:.2f}x |"
        print(line)
    print(f"\nprefill ({len(long_prompt)}-token prompt): {prefill:.1f} tok/s")
    if ref:
        print(f"\nllama.cpp (llama-cpp-python, n_threads=2, batch 1): decode {ref['decode_tok_s']:.1f} tok/s, "
              f"prefill {ref['prefill_tok_s']:.1f} tok/s; numpy/llama.cpp prefill "
              f"{prefill / ref['prefill_tok_s']:.2f}x")
    else:
        print("\nllama-cpp-python not importable: no llama.cpp comparison")


if __name__ == "__main__":
    asyncio.run(main())
