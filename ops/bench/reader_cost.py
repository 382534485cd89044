"""The event loop's cost a row-step of delivery alone (a benchmark tool, not a test): N request handles
(aotx.engine.request.RequestHandle) read as the engine's callers read them, and a step's plain tokens
handed to them as the engine's quiet path hands them (aotx.engine.request.deliver's callback), with no
engine and no thread: what the reader side of a 256-row step costs, and nothing else.

    python -m ops.bench.reader_cost [--streams 256] [--steps 1000] [--reader iter|batch|sink] [--uvloop]
                                    [--callgrind]

Readers: `iter` (a task a stream, `async for`: ops.gpu.engine_bench's), `batch` (api.runner.merge_batches
of one handle with the latency observer: an in-process surface's), `sink` (RequestHandle.redirect into
aotx.engine_service's sinks, observer included, and its flush packing for a NATS that drops the bytes: an
HTTP worker's generation). Prints the loop's CPU (thread clock) a row-step; `--callgrind`: instructions a
row-step as (a run of 2·S steps − a run of S steps) / (S · streams) under valgrind --tool=callgrind, both
whole processes (no start/stop toggles), so start-up and teardown cancel out; gc.freeze() before the steps
(a full collection of the imports' objects in one run and not the other would swamp the difference).
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import time

WARM = 3


async def run(streams: int, steps: int, reader: str) -> float:
    from aotx.engine.request import RequestHandle, deliver
    from aotx.engine.types import Delta
    from aotx.request_latency import RequestLatency
    from api.runner import merge_batches
    from ops.bench.engine_host_step import _wire_sinks

    loop = asyncio.get_running_loop()
    latency = RequestLatency()
    handles = [RequestHandle(f"r{i}", 30, steps + 10, loop, lambda: None) for i in range(streams)]
    counts = [0] * streams

    async def by_iter(i: int) -> None:
        async for d in handles[i]:
            counts[i] += len(d.token_ids)

    async def by_batch(i: int) -> None:
        handles[i].observe(latency.observer("chat", "stream"))
        async for batch in merge_batches([handles[i]]):
            for _, d in batch:
                counts[i] += len(d.token_ids)

    if reader == "sink":
        wire, waits = _wire_sinks(), []
        for i, h in enumerate(handles):
            h.observe(latency.observer("chat", "stream"))
            sink, plain = wire._sink(wire.outbox, i, h.prompt_tokens)
            done = loop.create_future()
            waits.append(done)

            def last(d, sink=sink, done=done) -> None:
                sink(d)
                if d.finish_reason is not None:
                    done.set_result(None)
            h.redirect(last, plain)
    else:
        waits = [loop.create_task((by_iter if reader == "iter" else by_batch)(i)) for i in range(streams)]
    await asyncio.sleep(0)
    gc.collect()
    gc.freeze()   # (the imports' objects out of every collection: the run's own young objects are what gc sees)
    texts = (" river", " mill", " bridge", " the")
    t0 = 0.0
    for s in range(steps + WARM):
        if s == WARM:
            t0 = time.thread_time()
        step = loop.create_future()
        deliver(loop, [(h, texts[s % 4], (s,), s + 1) for h in handles])   # (as the engine thread's _flush)
        loop.call_soon(step.set_result, None)
        await step
        await asyncio.sleep(0)    # the readers' turn (and the sink's flush task)
    cpu = time.thread_time() - t0
    for h in handles:
        h.put(Delta("", (), finish_reason="stop"))
    await asyncio.gather(*waits)
    return cpu * 1e6 / (streams * steps)


def _callgrind(args) -> int:
    totals = []
    for steps in (args.steps, 2 * args.steps):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cg.out")
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                   "ops.bench.reader_cost", "--streams", str(args.streams), "--steps", str(steps),
                   "--reader", args.reader, *(["--uvloop"] if args.uvloop else [])]
            subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True, capture_output=True)
            with open(out) as f:
                totals.append(next(int(line.split()[1]) for line in f if line.startswith("totals:")))
    per = (totals[1] - totals[0]) / (args.steps * args.streams)
    print(f"{args.reader} on {'uvloop' if args.uvloop else 'asyncio'}, {args.streams} streams: {per:,.0f} "
          f"instructions a row-step (callgrind; {args.steps} steps more)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--reader", choices=("iter", "batch", "sink"), default="iter")
    ap.add_argument("--uvloop", action="store_true", help="uvloop's loop (the serving commands')")
    ap.add_argument("--callgrind", action="store_true")
    args = ap.parse_args(argv)
    if args.callgrind:
        return _callgrind(args)
    if args.uvloop:
        import uvloop
        per = uvloop.run(run(args.streams, args.steps, args.reader))
    else:
        per = asyncio.run(run(args.streams, args.steps, args.reader))
    print(f"{args.reader} on {'uvloop' if args.uvloop else 'asyncio'}, {args.streams} streams: {per:.2f} µs a "
          f"row-step (the loop's CPU clock); load {open('/proc/loadavg').read().split()[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
