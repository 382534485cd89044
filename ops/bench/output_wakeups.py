"""The event loop's cost of N shared inputs' output while the engine steps (a benchmark, not a test):
aotx.runtime.input_run's `_stream` — the loop that takes an input's deltas and journals them in batches
— for N inputs at once, fed from a thread at `--step-ms` a step (one loop callback per step for every
input, as aotx.engine.request.deliver does), with a journal whose every write costs `--write-ms` of
waiting (an append's ack) and no CPU. Prints the event loop's CPU µs per engine step and per token,
and how often the runs were woken; no model, no nats-server, no HTTP: only the code between the
engine's hand-over and the journal's port.

    python -m ops.bench.output_wakeups [--inputs 32] [--tokens 128] [--step-ms 2.7] [--write-ms 10] [--repeat 3]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from types import SimpleNamespace

from aotx.engine.request import RequestHandle, deliver
from aotx.engine.types import Delta
from aotx.runtime.execution_port import ExecutionSettings
from aotx.runtime.input_run import InputRunner


class _Journal:
    """InputJournal's `write`: `seconds` of waiting, then saved."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.writes = seconds, 0

    async def write(self, run, *events) -> bool:
        self.writes += 1
        await asyncio.sleep(self.seconds)
        return True


class _Run:
    """What `_stream` reads of a Running: its key, its handle, its record (never cancelled here)."""

    record_value = SimpleNamespace(cancel_requested=False)

    def __init__(self, i: int, handle: RequestHandle) -> None:
        self.lineage, self.sequence, self.handle, self.cancelled = i.to_bytes(16, "big"), 1, handle, False

    def record(self, state):
        return self.record_value


class _CountingHandle(RequestHandle):
    wakes = 0

    def _push(self, delta: Delta) -> None:
        waiting = self._waiter is not None
        super()._push(delta)
        if waiting and self._waiter is None:
            _CountingHandle.wakes += 1


def _engine(loop, handles: list[RequestHandle], tokens: int, step_s: float) -> None:
    """The engine's thread: one delivery of a token to every input per step."""
    for k in range(1, tokens + 1):
        time.sleep(step_s)
        deliver(loop, [(h, Delta(" word", token_ids=(k,), finish_reason="length" if k == tokens else None,
                                 prompt_tokens=8, completion_tokens=k)) for h in handles])


async def one_run(inputs: int, tokens: int, step_s: float, write_s: float) -> dict:
    loop = asyncio.get_running_loop()
    journal = _Journal(write_s)
    settings = ExecutionSettings(None, 300.0, 1, 3, 65536, lambda lineage: None)
    runner = InputRunner(None, SimpleNamespace(state=None), settings, journal, None, None, lambda: None)
    _CountingHandle.wakes = 0
    handles = [_CountingHandle(f"r{i}", 8, tokens, loop, lambda: None) for i in range(inputs)]
    runs = [_Run(i, h) for i, h in enumerate(handles)]
    engine = threading.Thread(target=_engine, args=(loop, handles, tokens, step_s), daemon=True)
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    engine.start()
    await asyncio.gather(*(runner._stream(run, 8) for run in runs))
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    engine.join()
    return {"cpu_us_step": cpu * 1e6 / tokens, "cpu_us_token": cpu * 1e6 / (tokens * inputs),
            "wakes_per_input": _CountingHandle.wakes / inputs, "writes_per_input": journal.writes / inputs,
            "wall_s": wall}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--step-ms", type=float, default=2.7)
    ap.add_argument("--write-ms", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = [asyncio.run(one_run(args.inputs, args.tokens, args.step_ms / 1e3, args.write_ms / 1e3))
            for _ in range(args.repeat)]
    best = min(rows, key=lambda r: r["cpu_us_step"])
    print(f"{args.inputs} inputs x {args.tokens} tokens, a step every {args.step_ms:g} ms, a write {args.write_ms:g} ms: "
          f"event loop CPU {best['cpu_us_step']:.0f} us a step (median {statistics.median(r['cpu_us_step'] for r in rows):.0f}), "
          f"{best['cpu_us_token']:.1f} us a token; per input {best['wakes_per_input']:.1f} wake-ups by a delta, "
          f"{best['writes_per_input']:.1f} writes; wall {best['wall_s']:.2f} s (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
