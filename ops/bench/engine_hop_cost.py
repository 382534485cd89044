"""The main process's CPU per generated token on the engine hop of `aotx serve --http-workers N` (a benchmark,
not a test): from the engine thread's hand-over of a step's deltas (aotx.engine.request.deliver) through
aotx.engine_service's per-worker outboxes to the packed NATS messages, in one process, without the model,
the network or nats-server (publish is counted, not sent); with `--nats`, through a real nats-py connection
to an embedded nats-server (nobody subscribes to the inboxes: the server drops the messages).

    python -m ops.bench.engine_hop_cost [--streams 16,64,256] [--workers 1,8] [--steps 400] [--repeat 3] [--nats] [--profile]
                                        [--forms delta,parts] [--observed]

Each step hands every live stream one plain token (as the engine's decode step does); prints the best of
`--repeat` runs as CPU µs per token and per step, messages and bytes per token. `--profile`: a cProfile of
the last configuration, by own time. `--forms`: how the tokens are handed over, a Delta each (`delta`) or a
quiet token's parts (`parts`: (handle, text, ids, n), RequestHandle.put_plain, as the engine's quiet path
does since session 12), one row each, the same run; `--observed`: each handle has the request-latency
observer `aotx serve` gives it (aotx.serving: aotx.request_latency).
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


class _ThroughNats(_CountingNats):
    def __init__(self, nc) -> None:
        super().__init__()
        self._nc, self.max_payload = nc, nc.max_payload

    async def publish(self, subject: str, data: bytes) -> None:
        await super().publish(subject, data)
        await self._nc.publish(subject, data)


class _Handles:
    """What EngineService needs of a ModelService: submit() -> an engine RequestHandle (`observed`: with the
    request-latency observer, as aotx.serving.ModelService.submit gives it)."""

    def __init__(self, observed: bool = False) -> None:
        self.count = 0
        self.latency = None
        if observed:
            from aotx.request_latency import RequestLatency

            self.latency = RequestLatency()

    def submit(self, prompt, params, *, surface, lane):
        self.count += 1
        handle = RequestHandle(f"r{self.count}", len(prompt), params.max_tokens, asyncio.get_running_loop(),
                               lambda: None)
        if self.latency is not None:
            handle.observe(self.latency.observer(surface, lane))
        return handle


async def _run(streams: int, workers: int, steps: int, profile: cProfile.Profile | None,
               url: str | None = None, form: str = "delta", observed: bool = False) -> tuple[float, int, int]:
    service = EngineService(_Handles(observed), "nats://unused", "bench")
    service._nc = nats = _CountingNats()
    real = None
    if url is not None:
        import nats as nats_py

        real = await nats_py.connect(url)
        service._nc = nats = _ThroughNats(real)
    params = params_to_wire(SamplingParams(max_tokens=10**6))
    for w in range(workers):
        mine = range(w, streams, workers)
        service._submit({"v": WIRE_VERSION, "w": f"w{w}", "inbox": f"inbox.{w}", "surface": "chat", "lane": "stream",
                         "items": [[i, [1, 2, 3], params] for i in mine]})
    handles = list(service._gens.values())
    loop = asyncio.get_running_loop()
    if form == "parts":
        batches = [[(h, " tok", (k,), k) for h in handles] for k in range(steps)]
    else:
        batches = [[(h, Delta(" tok", (k,), (), None, None, 3, k)) for h in handles] for k in range(steps)]
    start = time.process_time()
    if profile:
        profile.enable()
    for items in batches:
        deliver(loop, items)
        await asyncio.sleep(0)   # put_all runs
        await asyncio.sleep(0)   # the flush runs
    if real is not None:
        await real.flush()
    if profile:
        profile.disable()
    spent = time.process_time() - start
    if real is not None:
        await real.close()
    return spent, nats.messages, nats.bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="16,64,256")
    ap.add_argument("--workers", default="1,8")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--nats", action="store_true", help="publish through a real connection to an embedded nats-server")
    ap.add_argument("--forms", default="delta", help="delta, parts or both: how a plain token is handed over")
    ap.add_argument("--observed", action="store_true", help="each handle has the request-latency observer")
    args = ap.parse_args(argv)
    if args.nats:
        import tempfile

        from eventlog import EmbeddedNats

        with tempfile.TemporaryDirectory(prefix="aotx-hop-") as var, EmbeddedNats(var) as server:
            return _table(args, server.client_url())
    return _table(args, None)


def _table(args, url: str | None) -> int:
    print("| streams | workers | form | CPU µs/token | µs/step | messages/step | bytes/token |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    configs = [(s, w) for s in map(int, args.streams.split(",")) for w in map(int, args.workers.split(",")) if w <= s]
    forms = args.forms.split(",")
    profile = cProfile.Profile() if args.profile else None
    for n, (s, w) in enumerate(configs):
        for form in forms:
            # (the forms alternate run by run: the box's load moves both alike)
            runs = [asyncio.run(_run(s, w, args.steps, None, url, form, args.observed)) for _ in range(args.repeat)]
            if profile and n == len(configs) - 1 and form == forms[-1]:
                asyncio.run(_run(s, w, args.steps, profile, url, form, args.observed))
            cpu, messages, size = min(runs)
            tokens = s * args.steps
            print(f"| {s} | {w} | {form} | {cpu / tokens * 1e6:.2f} | {cpu / args.steps * 1e6:.0f} | "
                  f"{messages / args.steps:.1f} | {size / tokens:.1f} |")
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
