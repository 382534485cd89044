"""What one stored command waits in the stored group commit, at N concurrent stored responses (a benchmark,
not a test): the CreateResponse a `store: true` response records before the engine is asked, and the
FinishResponse its terminal event waits for.

    .venv/bin/python -m ops.bench.stored_rounds [--levels 8,32] [--reps 5] [--gil-thread] [--no-chains] [--chain-min N]
        [--switch-interval MS]

One embedded nats-server (file storage, sync_interval always) and one SharedRuntime. Each repetition: N
tasks at once record a CreateResponse shaped as /v1/responses records one (one input message, the echoed
parameters), wait `--gen` seconds, then record its FinishResponse (one output message, usage). Reports the
p50 of each over every repetition, the rounds' journal writes (ticks per round, ms per write), and the
event loop thread's CPU per stored command in the rounds (time.thread_time over each round: decide, encode,
append, apply; what a stored response costs the one event loop twice).

`--gil-thread`: a thread runs pure Python meanwhile, holding the GIL as the CUDA engine's launch loop does
in `aotx serve` (the event loop then waits up to a switch interval each time it wakes). `--no-chains`:
a round's several ticks of one lineage are appended one after the other, each awaiting its ack (what the
stored round did before aotx.runtime.stored_round.CHAIN_MIN), instead of as one atomic batch from CHAIN_MIN
ticks on.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from aotx.runtime import SharedRuntime, stored_round
from aotx.stored import (
    CreateResponse,
    FinishResponse,
    ResponseStatus,
    Saved,
    identity_of_key,
)
from eventlog import EmbeddedNats, StreamSpec

PARAMS = {"text": {"format": {"type": "text"}}, "truncation": "disabled", "store": True, "temperature": 0.0,
          "top_p": 1.0, "max_output_tokens": 32, "tool_choice": "auto", "parallel_tool_calls": True,
          "user": None, "reasoning": {"effort": None, "summary": None}, "top_logprobs": 0, "service_tier": "default"}
USAGE = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 32,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 62}


def _item(n: int, role: str, text: str) -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"id": f"msg_{n:048x}", "type": "message", "role": role, "status": "completed",
            "content": [{"type": kind, "text": text}]}


def _hold_the_gil(busy_ms: float | None = None) -> None:
    """Pure Python forever; with `busy_ms`, steps as the CUDA engine's loop makes them: that long holding
    the GIL (launch, postprocess), then 0.5 ms without it (waiting on the device)."""
    x = 0
    while True:
        if busy_ms is None:
            x += 1
            continue
        end = time.perf_counter() + busy_ms / 1000.0
        while time.perf_counter() < end:
            x += 1
        time.sleep(0.0005)


async def _one(rt: SharedRuntime, identity: str, n: int, gen: float) -> tuple[float, float]:
    rid = f"resp_{n:048x}"
    t = time.perf_counter()
    out = await rt.stored.record(identity, CreateResponse(rid, 1_800_000_000, "smollm2-135m-instruct",
                                                          [_item(2 * n, "user", "Describe a cat in one sentence.")],
                                                          params=PARAMS))
    create = time.perf_counter() - t
    assert isinstance(out, Saved), out
    await asyncio.sleep(gen)
    t = time.perf_counter()
    text = "A cat is a small furry animal that purrs and sleeps a lot. " * 3
    out = await rt.stored.record(identity, FinishResponse(rid, ResponseStatus.COMPLETED,
                                                          [_item(2 * n + 1, "assistant", text)], usage=USAGE))
    assert isinstance(out, Saved), out
    return create, time.perf_counter() - t


async def bench(levels: list[int], reps: int, gen: float) -> None:
    with tempfile.TemporaryDirectory(prefix="aotx-stored-rounds-") as tmp:
        async with EmbeddedNats(Path(tmp) / "nats") as server:
            rt = await SharedRuntime(server.url, StreamSpec(name="BENCHROUNDS", subject_prefix="br.j"),
                                     progress=False, nats_auth=server.auth()).start()
            writes: list[tuple[int, float]] = []
            inner = rt.writer.write

            async def timed(flights, *args, **kw):
                t = time.perf_counter()
                ok = await inner(flights, *args, **kw)
                writes.append((sum(len(f.ticks) for f in flights), time.perf_counter() - t))
                return ok
            rt.writer.write = timed
            cpu: list[tuple[int, float]] = []   # (commands, the loop thread's CPU seconds) per stored round
            inner_round = rt.stored.commit.round

            async def round_cpu(batch):
                t = time.thread_time()
                again = await inner_round(batch)
                cpu.append((len(batch), time.thread_time() - t))
                return again
            rt.stored.commit.round = round_cpu
            identity, k = identity_of_key("bench-key"), 0
            try:
                for n in levels:
                    creates, finishes = [], []
                    writes.clear()
                    cpu.clear()
                    for _ in range(reps):
                        res = await asyncio.gather(*(_one(rt, identity, k + i, gen) for i in range(n)))
                        k += n
                        creates += [r[0] for r in res]
                        finishes += [r[1] for r in res]
                    print(f"| {n} | {statistics.median(creates) * 1e3:.1f} | {statistics.median(finishes) * 1e3:.1f} "
                          f"| {statistics.median(t for t, _ in writes):.0f} "
                          f"| {statistics.median(s for _, s in writes) * 1e3:.1f} "
                          f"| {sum(c for _, c in cpu) / sum(n for n, _ in cpu) * 1e6:.0f} |", flush=True)
            finally:
                await rt.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="8,32")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gen", type=float, default=0.2, help="seconds between a response's create and finish")
    ap.add_argument("--gil-thread", action="store_true", help="a thread holds the GIL meanwhile (as the engine)")
    ap.add_argument("--gil-step-ms", type=float, default=None, metavar="MS",
                    help="with --gil-thread: it holds the GIL MS at a time, then lets go for 0.5 ms (an engine step)")
    ap.add_argument("--no-chains", action="store_true", help="append a lineage's ticks one by one (as before)")
    ap.add_argument("--chain-min", type=int, default=None, metavar="N",
                    help="a flight of N ticks or more goes as one atomic batch (as AOTX_STORED_CHAIN_MIN=N)")
    ap.add_argument("--switch-interval", type=float, default=None, metavar="MS",
                    help="the GIL switch interval (as `aotx serve --switch-interval`; default CPython's 5 ms)")
    args = ap.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval / 1000.0)
    if args.chain_min is not None:
        stored_round.CHAIN_MIN = max(1, args.chain_min)
    if args.no_chains:
        stored_round.CHAIN_MIN = None
    if args.gil_thread:
        threading.Thread(target=_hold_the_gil, args=(args.gil_step_ms,), daemon=True, name="gil-holder").start()
    print(f"\n## stored command wait (gil thread: {args.gil_thread}, switch interval "
          f"{sys.getswitchinterval() * 1000:g} ms, chains batched from: {stored_round.CHAIN_MIN} ticks, "
          f"{args.reps} reps)\n")
    print("| concurrent | CreateResponse p50 ms | FinishResponse p50 ms | ticks per write p50 | write p50 ms "
          "| round CPU µs per command |")
    print("|---:|---:|---:|---:|---:|---:|")
    asyncio.run(bench([int(x) for x in args.levels.split(",")], args.reps, args.gen))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
