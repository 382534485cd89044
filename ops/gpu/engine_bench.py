"""The real Engine (scheduler, block manager, runner, detokenizer) in process, real weights: N
concurrent streaming chat requests; aggregate tok/s, TTFT and inter-token latency p50/p99, the
device-busy share and the decode batch width, for the one-step-behind loop and the classic one.

    python -m ops.gpu.engine_bench [--concurrency 64] [--max-tokens 256] [--loops behind,classic]
                                   [--backend cuda] [--readers iter,sink] [--event-loops asyncio,uvloop]

Device busy (CUDA): CUDA events around every step on the overlapped launcher
(kernels.cuda.overlap), which both loops use here ("classic" = that launcher with every step read
back before the next is scheduled); busy share = GPU-busy time / (busy + the gaps between steps
while work waited). On numpy the same share comes from the host clock of the device thread.
This is the engine's in-process surface; the HTTP surface adds its own serialisation on top.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from ops.gpu.latency import device_share, ignore_eos, set_ignore_eos, summarize
from ops.gpu.model_check import PROMPTS

PAGE = 16


def pages_for(concurrency: int, max_tokens: int) -> int:
    return concurrency * (-(-(96 + max_tokens) // PAGE)) + 64


def stats_doc(engine) -> dict:
    s = engine.stats()
    return {"device_busy_seconds": s.device_busy_s, "device_idle_seconds": s.device_idle_s,
            "decode_rows_total": s.decode_rows_total, "decode_steps_total": s.decode_steps_total,
            "max_batch_width": s.max_batch_width}


def make_engine(bundle, backend, concurrency: int, loop: str):
    from aotx.engine import Engine, EngineConfig
    from aotx.engine.launch import make_launcher

    own = getattr(backend, "step_launcher", None)
    launcher = own(force=True) if callable(own) else make_launcher(backend, loop == "behind")
    config = EngineConfig(max_batch=concurrency, num_pages=backend.num_pages, page_size=PAGE,
                          overlap=loop == "behind")
    return Engine(backend, bundle.tokenizer, config, launcher=launcher)


async def run_engine(bundle, backend, concurrency: int, max_tokens: int, temperature: float, loop: str,
                     reader: str = "iter") -> dict:
    from aotx.engine import SamplingParams

    engine = make_engine(bundle, backend, concurrency, loop)
    engine.start()
    tok = bundle.tokenizer

    def prompt(i):
        text = PROMPTS[i % len(PROMPTS)] + " Answer in detail."
        return tok.encode(bundle.chat_template.render([{"role": "user", "content": text}], add_generation_prompt=True))

    async def one(i, stamps, counts, n):
        params = SamplingParams(max_tokens=n, temperature=temperature, seed=i, ignore_eos=ignore_eos())
        handle = engine.submit(prompt(i), params)
        if reader == "iter":     # a task a stream, woken a step (as an in-process surface's reader)
            async for d in handle:
                if d.token_ids:
                    stamps[i].append(time.perf_counter())
                    counts[i] += len(d.token_ids)
            return
        # "sink": no task woken a token (RequestHandle.redirect, as aotx.engine_service's generations): the
        # loop's cost a row-step is one call, so the step is what the device and the engine thread allow
        done, mine, clock = asyncio.get_running_loop().create_future(), stamps[i], time.perf_counter

        def plain(text, ids, completion_tokens) -> None:
            mine.append(clock())
            counts[i] += len(ids)

        def sink(d) -> None:
            if d.token_ids:
                plain(d.text, d.token_ids, d.completion_tokens)
            if d.finish_reason is not None:
                done.set_result(None)
        handle.redirect(sink, plain)
        await done

    try:
        warm = min(8, concurrency)   # (no longer than the measured run: a 3-token smoke run warms with 3)
        await asyncio.gather(*(one(i, [[] for _ in range(warm)], [0] * warm, min(16, max_tokens))
                               for i in range(warm)))
        await asyncio.gather(*(one(i, [[] for _ in range(concurrency)], [0] * concurrency, 4)
                               for i in range(concurrency)))              # this width's graphs captured
        stamps = [[] for _ in range(concurrency)]
        counts = [0] * concurrency
        before = stats_doc(engine)
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, stamps, counts, max_tokens) for i in range(concurrency)))
        wall = time.perf_counter() - t0
        after = stats_doc(engine)
    finally:
        await engine.stop()
    return {**summarize(stamps, t0, wall, sum(counts)), **device_share(before, after), "loop": loop,
            "reader": reader, "event_loop": type(asyncio.get_running_loop()).__module__.split(".")[0]}


def line(r: dict) -> str:
    return (f"engine {r['loop']:<7} {r['requests']:>3} streams (reader {r.get('reader', 'iter')} on "
            f"{r.get('event_loop', 'asyncio')}): {r['tokens']} tokens in {r['wall_s']:.2f} s = "
            f"{r['tok_s']:,.0f} tok/s; TTFT p50 {r['ttft_p50_ms']:.1f} p99 {r['ttft_p99_ms']:.1f} ms; ITL p50 "
            f"{r['itl_p50_ms']:.2f} p99 {r['itl_p99_ms']:.2f} ms; device busy {r['device_busy_share']:.0%}; "
            f"decode batch mean {r['mean_decode_batch']:.0f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--loops", default="behind,classic")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--ignore-eos", action="store_true", help="every stream runs to --max-tokens (vLLM's switch)")
    ap.add_argument("--readers", default="iter",
                    help="iter (a task a stream: async for), sink (RequestHandle.redirect: no task woken a token)")
    ap.add_argument("--event-loops", default="asyncio", help="asyncio, uvloop (the serving commands' loop)")
    args = ap.parse_args(argv)
    set_ignore_eos(args.ignore_eos)
    from kernels import create_backend, load_model

    bundle = load_model(progress=False)
    backend = create_backend(args.backend, bundle, num_pages=pages_for(args.concurrency, args.max_tokens),
                             page_size=PAGE)
    for event_loop in args.event_loops.split(","):
        run = asyncio.run if event_loop == "asyncio" else __import__("uvloop").run
        for reader in args.readers.split(","):
            for loop in args.loops.split(","):
                r = run(run_engine(bundle, backend, args.concurrency, args.max_tokens, args.temperature, loop,
                                   reader))
                print(line(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
