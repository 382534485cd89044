"""The engine's host work per step at N streams, without a GPU (a benchmark tool, not a test): the real
Engine (the model's real tokenizer, scheduler, paged pool, runner's batch build, detokenizer, stop checks,
delivery to an event loop) over ops.bench.paced_serve's stand-in backend, whose forward is a sleep of
`--step-ms` (the GIL released, as while the host waits for the device) and whose sampled ids are the
next tokens of an English text, no compute. The one-step-behind loop runs the sleeps on the launcher's
device thread, as CUDA's launcher overlaps them.

    python -m ops.bench.engine_host_step [--streams 64,256] [--max-tokens 128] [--step-ms 2.6]
                                         [--loop behind|classic] [--profile] [--split] [--callgrind] [--isolated]
                                         [--burst] [--reader iter|batch|sink] [--uvloop] [--gc-freeze]

Prints, per stream count: steps, the engine thread's CPU per step and per row-step (its CPU clock,
pthread_getcpuclockid), the event loop's CPU per row-step (the reader), tok/s and the host-busy share
of a step; `--profile`: the engine thread's CPU per row-step by stage (cProfile on the thread's CPU
clock, which inflates every figure: read the split, not the sum); `--split`: the same stages timed by the
engine thread's CPU clock around each method, no profiler (µs per row-step in place); `--callgrind`: run under
`valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes` and count instructions only over the
measured phase (callgrind_control -i on/off): per step and per token, all threads and the engine thread
alone (the busiest thread after the main one), stable where this box's timings swing 2x with load;
`--isolated`: schedule, build and sampling_rows alone over a steady batch of decoding rows (no engine).
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import subprocess
import sys
import threading
import time

PAGE = 16

# stage: the functions whose cumulative engine-thread CPU makes it (the rest is "loop/other")
STAGES = [
    ("apply inbox", ("engine.py", "_apply")),
    ("schedule", ("scheduler.py", "schedule")),
    ("build batch", ("runner.py", "build")),
    ("sampling rows", ("row_sampling.py", "sampling_rows")),
    ("launch (launcher)", ("launch.py", "launch")),
    ("read back", ("runner.py", "complete")),
    ("postprocess (detok, stops, stats)", ("step_output.py", "_postprocess_step")),   # (before: _postprocess a row)
    ("deliver (flush)", ("step_output.py", "_flush")),
    ("gauges", ("engine.py", "_sync_gauges")),
]


def _thread_cpu(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def _callgrind(on: bool) -> None:
    if os.environ.get("AOTX_UNDER_CALLGRIND"):
        subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                       check=True, stdout=subprocess.DEVNULL)


# --split: the engine thread's CPU clock read around each of these methods (no profiler; launch's own
# figure is without the build inside it). Either tree's names (before session 11: no split of launch).
SPLIT = [
    ("schedule", "aotx.engine.scheduler", "Scheduler", "schedule"),
    ("build batch", "aotx.engine.runner", "ModelRunner", "build"),
    ("launch (rest: sampling rows, launcher, bookkeeping)", "aotx.engine.runner", "ModelRunner", "launch"),
    ("read back", "aotx.engine.runner", "ModelRunner", "complete"),
    ("postprocess (detok, stops, stats, deltas)", "aotx.engine.step_output", "StepOutput", "_postprocess_step"),
    ("hand-over to the loop (flush)", "aotx.engine.step_output", "StepOutput", "_flush"),
    ("gauges", "aotx.engine.engine", "Engine", "_sync_gauges"),
]


def _split_clocks(engine) -> dict[str, float]:
    """Wrap the SPLIT methods of `engine`'s parts (instance attributes) with the thread's CPU clock; the
    totals (seconds) accumulate in the returned dict while `on` is set in it."""
    import importlib

    sums: dict[str, float] = {name: 0.0 for name, *_ in SPLIT}
    sums["on"] = 0.0
    owners = {"Scheduler": engine.scheduler, "ModelRunner": engine.runner, "StepOutput": engine, "Engine": engine}
    for name, module, cls, meth in SPLIT:
        importlib.import_module(module)
        obj = owners[cls]
        inner = getattr(obj, meth)
        nested = name.startswith("launch")

        def wrapped(*a, _inner=inner, _name=name, _nested=nested, **k):
            t0 = time.thread_time()
            b0 = sums["build batch"]
            try:
                return _inner(*a, **k)
            finally:
                if sums["on"]:
                    sums[_name] += time.thread_time() - t0 - ((sums["build batch"] - b0) if _nested else 0.0)
        setattr(obj, meth, wrapped)
    return sums


class _NullNats:
    """--reader sink: where EngineService's flush publishes (the bytes packed, then dropped)."""
    max_payload = 1 << 20

    async def publish(self, subject: str, data: bytes) -> None:
        pass


def _wire_sinks():
    """An EngineService's delta side alone (its sinks, outbox and flush), publishing to _NullNats."""
    from aotx.engine_service import EngineService, _Outbox

    svc = EngineService(None, "nats://unused", "bench")
    svc._nc = _NullNats()
    svc.outbox = _Outbox("w", "inbox")
    return svc


async def run(bundle, streams: int, max_tokens: int, step_ms: float, loop_kind: str, profile: bool,
              split: bool = False, burst: bool = False, reader: str = "iter", gc_freeze: bool = False) -> dict:
    from aotx.engine import Engine, EngineConfig, SamplingParams
    from aotx.request_latency import RequestLatency
    from api.runner import merge_batches
    from aotx.engine.launch import make_launcher
    from ops.bench.paced_serve import PacedBackend

    pages = streams * (-(-(96 + max_tokens) // PAGE)) + 64
    backend = PacedBackend(bundle, pages, PAGE, step_ms / 1e3)
    config = EngineConfig(max_batch=streams, num_pages=pages, page_size=PAGE, overlap=loop_kind == "behind")
    engine = Engine(backend, bundle.tokenizer, config, launcher=make_launcher(backend, loop_kind == "behind"))
    prof = cProfile.Profile(time.thread_time) if profile else None
    if prof is not None:
        inner = engine._loop

        def profiled() -> None:
            prof.enable()
            try:
                inner()
            finally:
                prof.disable()
        engine._loop = profiled
    sums = _split_clocks(engine) if split else None
    engine.start()
    tok = bundle.tokenizer

    def prompt(i: int) -> list[int]:
        text = f"Question {i}: tell me about rivers, mills and bridges. Answer in detail."
        return tok.encode(bundle.chat_template.render([{"role": "user", "content": text}],
                                                      add_generation_prompt=True))

    prompts = [prompt(i) for i in range(streams)]   # (rendered and tokenized before the measured phase)
    latency = RequestLatency()
    wire = _wire_sinks() if reader == "sink" else None

    async def one(i: int, n: int, counts: list[int], handle=None) -> None:
        params = SamplingParams(max_tokens=n, temperature=0.7, seed=i, ignore_eos=True)
        handle = handle or engine.submit(prompts[i], params)
        if reader == "iter":      # the GPU engine bench's reader (ops.gpu.engine_bench)
            async for d in handle:
                counts[i] += len(d.token_ids)
            return
        handle.observe(latency.observer("chat", "stream"))     # as ModelService.submit
        if reader == "batch":     # an in-process surface's (api.runner.merge_batches of one handle)
            async for batch in merge_batches([handle]):
                for _, d in batch:
                    counts[i] += len(d.token_ids)
            return
        # "sink": an HTTP worker's generation (aotx.engine_service's sinks, flush and msgpack; no NATS)
        done = asyncio.get_running_loop().create_future()
        sink, plain = wire._sink(wire.outbox, i, handle.prompt_tokens)

        def last(d) -> None:
            sink(d)
            if d.finish_reason is not None:
                counts[i] = d.completion_tokens
                done.set_result(None)
        handle.redirect(last, plain)
        await done

    def all_at_once(n: int) -> list:
        """--burst: every request in the engine's inbox before its thread looks (its lock held: the
        engine's Condition is re-entrant), so each run schedules the same steps (under valgrind too)."""
        with engine._cond:
            return [engine.submit(prompts[i], SamplingParams(max_tokens=n, temperature=0.7, seed=i, ignore_eos=True))
                    for i in range(streams)]

    try:
        await asyncio.gather(*(one(i, 4, [0] * streams) for i in range(streams)))      # warm
        if gc_freeze:   # every object made so far out of the collector's reach (a full collection's cost)
            gc.collect()
            gc.freeze()
        t_full = time.perf_counter()
        gc.collect(2)
        t_full = time.perf_counter() - t_full
        counts = [0] * streams
        s0 = engine.stats()
        gc0 = [g["collections"] for g in gc.get_stats()]
        main0, eng0 = time.thread_time(), _thread_cpu(engine._thread)
        t0 = time.perf_counter()
        _callgrind(True)
        if sums is not None:
            sums["on"] = 1.0
        handles = all_at_once(max_tokens) if burst else [None] * streams
        await asyncio.gather(*(one(i, max_tokens, counts, handles[i]) for i in range(streams)))
        if sums is not None:
            sums["on"] = 0.0
        _callgrind(False)
        wall = time.perf_counter() - t0
        eng1, main1 = _thread_cpu(engine._thread), time.thread_time()
        s1 = engine.stats()
        gcs = [g["collections"] - c for g, c in zip(gc.get_stats(), gc0)]
    finally:
        await engine.stop()
    steps = s1.steps_total - s0.steps_total
    rows = s1.decode_rows_total - s0.decode_rows_total
    out = {"streams": streams, "tokens": sum(counts), "steps": steps, "row_steps": rows, "wall_s": wall,
           "engine_cpu_s": eng1 - eng0, "loop_cpu_s": main1 - main0, "load": open("/proc/loadavg").read().split()[0],
           "gc": gcs, "gc_full_ms": t_full * 1e3}
    if prof is not None:
        out["stages"] = _stages(prof)
    if sums is not None:
        out["split"] = [(name, sums[name]) for name, *_ in SPLIT]
    return out


def _stages(prof: cProfile.Profile) -> list[tuple[str, float]]:
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())   # own time of everything on the engine thread
    cum = {}
    for (file, _, fn), (_, _, _, ct, _) in st.stats.items():
        for name, (f, n) in STAGES:
            # (a tree from before step_output.py has these in engine.py)
            if fn == n and (file.endswith(f) or (f == "step_output.py" and file.endswith("engine.py"))) \
                    and ("aotx/engine" in file or "ops/bench" in file):
                cum[name] = cum.get(name, 0.0) + ct
    # launch's cumulative time includes build and sampling_rows (ModelRunner.launch calls them): the
    # launcher row is the backend's launcher only; read back includes ids() (the device thread's wait
    # is not CPU on this clock)
    if "postprocess (detok, stops, stats)" not in cum:   # a tree from before _postprocess_step: its rows
        cum["postprocess (detok, stops, stats)"] = sum(
            ct for (file, _, fn), (_, _, _, ct, _) in st.stats.items() if fn == "_postprocess" and file.endswith("engine.py"))
    return [(name, cum.get(name, 0.0)) for name, _ in STAGES] + [("all (engine thread, profiled)", total)]


def report(r: dict, profile: bool) -> str:
    steps, rows = max(1, r["steps"]), max(1, r["row_steps"])
    lines = [f"{r['streams']:>4} streams: {r['tokens']} tokens, {r['steps']} steps ({rows / steps:.0f} rows a step) "
             f"in {r['wall_s']:.2f} s = {r['tokens'] / r['wall_s']:,.0f} tok/s; engine thread CPU "
             f"{r['engine_cpu_s'] * 1e6 / steps:,.0f} µs/step = {r['engine_cpu_s'] * 1e6 / rows:.1f} µs/row-step; "
             f"event loop CPU {r['loop_cpu_s'] * 1e6 / rows:.2f} µs/row-step; gc collections (gen 0/1/2) "
             f"{'/'.join(map(str, r['gc']))} (a full one before: {r['gc_full_ms']:.1f} ms); load {r['load']}"]
    for name, s in r.get("split", []):
        lines.append(f"      {name:<52} {s * 1e6 / steps:>7,.0f} µs/step {s * 1e6 / rows:>6.2f} µs/row-step")
    if profile:
        for name, s in r["stages"]:
            lines.append(f"      {name:<36} {s * 1e6 / steps:>9,.0f} µs/step {s * 1e6 / rows:>7.2f} µs/row-step")
    return "\n".join(lines)


def isolated(bundle, streams: int) -> str:
    """The step thread's three per-row stages alone, `streams` decoding rows of a steady batch, best of 200:
    Scheduler.schedule, ModelRunner.build, sampling_rows (with the runner's cache where the tree has one)."""
    import inspect

    from aotx.engine.block_manager import BlockManager
    from aotx.engine.detokenizer import Detokenizer
    from aotx.engine.row_sampling import sampling_rows
    from aotx.engine.runner import ModelRunner
    from aotx.engine.scheduler import Scheduler
    from aotx.engine.sequence import Sequence, SequenceStatus
    from aotx.engine.types import SamplingParams

    blocks = BlockManager(num_pages=streams * 20, page_size=PAGE)
    sched = Scheduler(blocks, streams, 8192)
    runner = ModelRunner(backend=None, blocks=blocks, tokenizer=bundle.tokenizer)
    for i in range(streams):
        seq = Sequence(prompt_ids=[7] * 40, params=SamplingParams(max_tokens=200, temperature=0.7), seed=i,
                       reserved_pages=16, detokenizer=Detokenizer(bundle.tokenizer))
        seq.output_ids, seq.num_computed, seq.status = [5] * 50, 89, SequenceStatus.RUNNING
        blocks.ensure_capacity(seq.seq_id, 90)
        sched.running.append(seq)

    def best(f) -> float:
        b = float("inf")
        for _ in range(200):
            t = time.perf_counter()
            f()
            b = min(b, time.perf_counter() - t)
        return b * 1e6
    out = sched.schedule()
    plan = runner.build(out.scheduled)
    seqs = [q for _, q in plan.sample]
    cached = "cache" in inspect.signature(sampling_rows).parameters
    extra = (runner._rows_cache,) if cached else ()
    return (f"{streams} decode rows alone: schedule {best(sched.schedule):.0f} µs, build "
            f"{best(lambda: runner.build(out.scheduled)):.0f} µs, sampling_rows "
            f"{best(lambda: sampling_rows(seqs, plan.pending_token, *extra)):.0f} µs"
            f"{' (steady batch: cached)' if cached else ''}; load {open('/proc/loadavg').read().split()[0]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="64,256")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--step-ms", type=float, default=2.6)
    ap.add_argument("--loop", choices=("behind", "classic"), default="behind")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--split", action="store_true",
                    help="the engine thread's CPU clock around each stage (no profiler): µs per row-step")
    ap.add_argument("--burst", action="store_true",
                    help="submit every request of the measured phase at once (the same steps in every run)")
    ap.add_argument("--isolated", action="store_true",
                    help="time schedule, build and sampling_rows alone over a steady batch, no engine")
    ap.add_argument("--reader", choices=("iter", "batch", "sink"), default="iter",
                    help="how each stream is read: async for (the GPU engine bench), next_batch with the latency "
                         "observer (an in-process surface), or an HTTP worker's sink (aotx.engine_service)")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval in ms (Python's default: 5): how long a thread that wants the GIL "
                         "waits before it asks the holder to drop it")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after the warm-up: the objects made so far never scanned again")
    ap.add_argument("--uvloop", action="store_true",
                    help="the readers' loop is uvloop's (the serving commands' loop: api.server.run_serving)")
    ap.add_argument("--callgrind", action="store_true",
                    help="re-run this under callgrind, instructions counted over the measured phase only")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.streams.split(",")]
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval / 1e3)
    if args.callgrind:
        return _under_callgrind(argv if argv is not None else sys.argv[1:], levels)
    from kernels import load_model

    bundle = load_model(progress=False)
    if args.isolated:
        for n in levels:
            print(isolated(bundle, n), flush=True)
        return 0
    for n in levels:
        r = (__import__("uvloop").run if args.uvloop else asyncio.run)(run(
            bundle, n, args.max_tokens, args.step_ms, args.loop, args.profile, args.split, args.burst, args.reader,
            args.gc_freeze))
        print(report(r, args.profile), flush=True)
    return 0


def _under_callgrind(argv: list[str], levels: list[int]) -> int:
    rest = [a for a in argv if a != "--callgrind"]
    for n in levels:
        out = f"/tmp/callgrind.engine_host_step.{os.getpid()}.{n}"
        args = [a for a in rest]
        if "--streams" in args:
            i = args.index("--streams")
            del args[i:i + 2]
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               f"--callgrind-out-file={out}",
               sys.executable, "-m", "ops.bench.engine_host_step", "--streams", str(n), *args]
        proc = subprocess.run(cmd, env={**os.environ, "AOTX_UNDER_CALLGRIND": "1"}, capture_output=True, text=True)
        print(proc.stdout, end="")
        per_thread = _thread_ir(out)
        ir = sum(per_thread.values())
        steps = _field(proc.stdout, " steps (")
        tokens = _field(proc.stdout, " tokens, ")
        main_ir = per_thread.get(1, 0)                 # thread 1: the event loop (the readers)
        others = sorted((v for k, v in per_thread.items() if k != 1), reverse=True)
        engine_ir = others[0] if others else 0         # the busiest other thread: the engine's step thread
        print(f"{n:>4} streams under callgrind: {ir:,} instructions in the measured phase (all threads) = "
              f"{ir / max(1, steps):,.0f} per step = {ir / max(1, tokens):,.0f} per token; engine thread "
              f"{engine_ir / max(1, steps):,.0f} per step = {engine_ir / max(1, tokens):,.0f} per token; event loop "
              f"{main_ir / max(1, tokens):,.0f} per token; other threads {sum(others[1:]):,}", flush=True)
    return 0


def _thread_ir(path: str) -> dict[int, int]:
    """Instructions per thread (callgrind --separate-threads: PATH-01, PATH-02, ...; 1 is the main thread)."""
    out = {}
    for name in os.listdir(os.path.dirname(path)):
        full = os.path.join(os.path.dirname(path), name)
        if full.startswith(path + "-"):
            with open(full) as f:
                for line in f:
                    if line.startswith("totals:"):   # (with --instr-atstart=no "summary:" says 0)
                        out[int(full.rsplit("-", 1)[1])] = int(line.split()[1])
                        break
    return out


def _field(text: str, marker: str, after: bool = False) -> int:
    line = next(l for l in text.splitlines() if marker in l)
    if after:   # "N steps (R rows a step)"
        return int(line.split(marker)[1].split()[0])
    return int(line.split(marker)[0].split()[-1])


if __name__ == "__main__":
    sys.exit(main())
