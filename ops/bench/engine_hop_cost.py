"""The main process's CPU per generated token on the engine hop of `aotx serve --http-workers N` (a benchmark,
not a test): from the engine thread's hand-over of a step's deltas (aotx.engine.request.deliver) through
aotx.engine_service's per-worker outboxes to the packed NATS messages, in one process, without the model,
the network or nats-server (publish is counted, not sent).

    python -m ops.bench.engine_hop_cost [--streams 16,64,256] [--workers 1,8] [--steps 400] [--repeat 3] [--profile]

Each step hands every live stream one plain token (as the engine's decode step does); prints the best of
`--repeat` runs as CPU µs per token and per step, messages and bytes per token. `--profile`: a cProfile of
the last configuration, by own time.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time

from aotx.engine.request import RequestHandle, deliver
from aotx.engine.types import Delta, SamplingParams
from aotx.engine_service import EngineService
from aotx.engine_wire import WIRE_VERSION, params_to_wire


class _CountingNats:
    max_payload = 1 << 20

    def __init__(self) -> None:
        self.messages = self.bytes = 0

    async def publish(self, subject: str, data: bytes) -> None:
        self.messages += 1
        self.bytes += len(data)


class _Handles:
    """What EngineService needs of a ModelService: submit() -> an engine RequestHandle."""

    def __init__(self) -> None:
        self.count = 0

    def submit(self, prompt, params, *, surface, lane):
        self.count += 1
        return RequestHandle(f"r{self.count}", len(prompt), params.max_tokens, asyncio.get_running_loop(),
                             lambda: None)


async def _run(streams: int, workers: int, steps: int, profile: cProfile.Profile | None) -> tuple[float, int, int]:
    service = EngineService(_Handles(), "nats://unused", "bench")
    service._nc = nats = _CountingNats()
    params = params_to_wire(SamplingParams(max_tokens=10**6))
    for w in range(workers):
        mine = range(w, streams, workers)
        service._submit({"v": WIRE_VERSION, "w": f"w{w}", "inbox": f"inbox.{w}", "surface": "chat", "lane": "stream",
                         "items": [[i, [1, 2, 3], params] for i in mine]})
    handles = list(service._gens.values())
    loop = asyncio.get_running_loop()
    batches = [[(h, Delta(" tok", (k,), (), None, None, 3, k)) for h in handles] for k in range(steps)]
    start = time.process_time()
    if profile:
        profile.enable()
    for items in batches:
        deliver(loop, items)
        await asyncio.sleep(0)   # put_all runs
        await asyncio.sleep(0)   # the flush runs
    if profile:
        profile.disable()
    return time.process_time() - start, nats.messages, nats.bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="16,64,256")
    ap.add_argument("--workers", default="1,8")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    print("| streams | workers | CPU µs/token | µs/step | messages/step | bytes/token |")
    print("|---:|---:|---:|---:|---:|---:|")
    configs = [(s, w) for s in map(int, args.streams.split(",")) for w in map(int, args.workers.split(",")) if w <= s]
    profile = cProfile.Profile() if args.profile else None
    for n, (s, w) in enumerate(configs):
        runs = [asyncio.run(_run(s, w, args.steps, None)) for _ in range(args.repeat)]
        if profile and n == len(configs) - 1:
            asyncio.run(_run(s, w, args.steps, profile))
        cpu, messages, size = min(runs)
        tokens = s * args.steps
        print(f"| {s} | {w} | {cpu / tokens * 1e6:.2f} | {cpu / args.steps * 1e6:.0f} | {messages / args.steps:.1f} "
              f"| {size / tokens:.1f} |")
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
