"""What the HTTP server + Quart + the chat surface cost per streamed token and per request (a benchmark,
not a test): `/v1/chat/completions` streams served over a scripted service that produces tokens as
fast as it is asked (no model, no engine), so the server process's CPU time is the HTTP side's.

    python -m ops.bench.http_stream_cost [--streams 1,16,64] [--tokens 256] [--requests 64] [--deliver step|wakeup]
                                         [--servers hypercorn,uvicorn] [--rounds 1]

Each server (ops.bench.server_variants: `uvicorn` is what `aotx serve` runs, `hypercorn` the former one)
runs in a child process of its own (its CPU time read from /proc), one after the other, `--rounds` times
(the table shows the median of the rounds and the ratio to the first server's). `--deliver step` (the
default): the handles are the engine's own aotx.engine.request.RequestHandle, and a step task hands one
token to every live stream in one loop callback per step (what aotx.engine.request.deliver does for the
engine thread); `wakeup`: each stream's token arrives on its own wake-up (the bench's first form). Prints
server CPU µs per streamed token and per request, the client's aggregate tok/s and its time to the first
content chunk.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import time

import httpx

from aotx.engine.types import Delta
from aotx.sampling_defaults import SamplingDefaults
from ops.proc_cpu import cpu_seconds


class _Handle:
    def __init__(self, n: int, prompt: int) -> None:
        self.n, self.prompt_tokens, self.cancelled, self.request_id = n, prompt, False, "bench"

    def cancel(self) -> None:
        self.cancelled = True

    async def _gen(self):
        for k in range(self.n):
            if self.cancelled:
                return
            await asyncio.sleep(0)             # one wake-up per token, as one engine step delivers
            last = k == self.n - 1
            yield Delta(" tok", token_ids=(k,), finish_reason="length" if last else None,
                        prompt_tokens=self.prompt_tokens, completion_tokens=k + 1)

    def __aiter__(self):
        return self._gen()


class _Stepper:
    """One token per live RequestHandle per step, every handle of a step put in one loop callback."""

    def __init__(self) -> None:
        self.live: list = []
        self._wake: asyncio.Event | None = None

    def add(self, handle) -> None:
        self.live.append(handle)
        if self._wake is None:
            self._wake = asyncio.Event()
            asyncio.get_running_loop().create_task(self._steps())
        self._wake.set()

    def _step(self) -> None:
        keep = []
        for h in self.live:
            if h._cancel_sent:
                h.put(Delta("", finish_reason="cancelled", prompt_tokens=h.prompt_tokens,
                            completion_tokens=h.k))
                continue
            h.k += 1
            last = h.k >= h.max_tokens
            h.put(Delta(" tok", token_ids=(h.k,), finish_reason="length" if last else None,
                        prompt_tokens=h.prompt_tokens, completion_tokens=h.k))
            if not last:
                keep.append(h)
        self.live = keep

    async def _steps(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.live:
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(0)
            loop.call_soon(self._step)   # one callback per step, as deliver() schedules from the engine thread


class ScriptedService:
    model_id = "smollm2-135m-instruct"
    created = 1700000000
    context_length = context_tokens = 8192
    default_max_tokens = 256
    backend_name = "scripted"
    vocab_size = 49152
    sampling_defaults = SamplingDefaults(0.2, 0.9)
    constraints = None      # no json_schema / strict tools in this bench's requests

    def known_model(self, name: str) -> bool:
        return name == self.model_id

    async def chat_prompt_ids(self, messages, tools=(), tool_choice=None, *, primer="", prefill="", limit=None):
        return [1, 2, 3]

    def token_bytes(self, token_id: int) -> bytes:
        return b" tok"

    def token_text(self, token_id: int) -> str:
        return " tok"

    deliver = "step"
    _stepper: _Stepper | None = None

    def submit(self, prompt_ids, params, *, surface, lane):
        if self.deliver == "wakeup":
            return _Handle(params.max_tokens, len(prompt_ids))
        from aotx.engine.request import RequestHandle
        handle = RequestHandle("bench", len(prompt_ids), params.max_tokens, asyncio.get_running_loop(),
                               lambda: None)
        handle.k = 0
        if self._stepper is None:
            self._stepper = _Stepper()
        self._stepper.add(handle)
        return handle

    async def stop(self) -> None:
        pass


def _serve(port_q, profile: str | None = None, deliver: str = "step", server: str = "uvicorn") -> None:
    ScriptedService.deliver = deliver
    if profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
        import signal
        signal.signal(signal.SIGTERM, lambda *_: (prof.disable(), prof.dump_stats(profile), os._exit(0)))
    _serve_app(port_q, server)


def _serve_app(port_q, server: str) -> None:
    from quart import Quart

    from api.app_common import install_common
    from api.server import bind_socket
    from api.surfaces import chat
    from ops.bench.server_variants import serve_variant

    app = Quart(__name__)
    app.extensions["aotx"] = ScriptedService()
    app.register_blueprint(chat.blueprint)
    install_common(app)
    sock = bind_socket("127.0.0.1", 0)
    port_q.put(sock.getsockname()[1])
    serve_variant(server, app, sock)


async def _load(base: str, streams: int, requests: int, tokens: int, ttft: list | None = None) -> tuple[int, float]:
    body = {"model": ScriptedService.model_id, "stream": True, "max_tokens": tokens,
            "messages": [{"role": "user", "content": "hi"}]}
    limits = httpx.Limits(max_connections=streams + 4, max_keepalive_connections=streams + 4)
    got = 0
    sem = asyncio.Semaphore(streams)

    async def one(client):
        nonlocal got
        async with sem:
            sent = time.perf_counter()
            async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                            if ttft is not None and sent:
                                ttft.append(time.perf_counter() - sent)
                                sent = 0.0
                            got += 1

    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        await asyncio.gather(*(one(client) for _ in range(min(streams, 4))))    # warm-up
        got = 0
        t0 = time.perf_counter()
        await asyncio.gather(*(one(client) for _ in range(requests)))
        return got, time.perf_counter() - t0


def _one_server(args, server: str, streams: list[int]) -> list[tuple]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(q, args.profile, args.deliver, server), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{q.get(timeout=60)}"
    rows = []
    try:
        for s in streams:
            before, ttft = cpu_seconds(proc.pid), []
            tokens, wall = asyncio.run(_load(base, s, max(args.requests, s), args.tokens, ttft))
            cpu = cpu_seconds(proc.pid) - before
            ttft.sort()
            rows.append((s, max(args.requests, s), tokens, wall, cpu, ttft[len(ttft) // 2] * 1e3 if ttft else 0.0))
    finally:
        proc.terminate()
        proc.join(10)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,16,64")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--profile", help="write a cProfile of the server process here")
    ap.add_argument("--deliver", choices=["step", "wakeup"], default="step")
    ap.add_argument("--servers", default="hypercorn,uvicorn",
                    help="comma-separated, of ops.bench.server_variants.SERVERS; ratios are to the first")
    ap.add_argument("--rounds", type=int, default=1, help="run every server this many times, alternating")
    args = ap.parse_args(argv)
    servers, streams = args.servers.split(","), [int(x) for x in args.streams.split(",")]
    runs: dict[tuple[str, int], list[tuple]] = {}
    loads = []
    for _ in range(args.rounds):
        for server in servers:
            for row in _one_server(args, server, streams):
                runs.setdefault((server, row[0]), []).append(row)
            loads.append(os.getloadavg()[0])

    def median(server: str, s: int) -> tuple:   # the round of the median CPU a token
        rows = sorted(runs[(server, s)], key=lambda r: r[4] / max(r[2], 1))
        return rows[len(rows) // 2]

    print(f"\n## HTTP streaming cost (server + Quart + chat surface, scripted tokens, --deliver {args.deliver}), "
          f"median of {args.rounds} round(s), load {min(loads):.1f}–{max(loads):.1f}\n")
    print("| server | concurrent streams | requests | tokens | wall s | client tok/s | server CPU µs/token "
          f"| ÷ {servers[0]} | server CPU ms/request | client TTFT p50 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for server in servers:
        for s in streams:
            _, n, tokens, wall, cpu, ttft = median(server, s)
            peer = median(servers[0], s)
            ratio = (cpu / max(tokens, 1)) / (peer[4] / max(peer[2], 1))
            print(f"| {server} | {s} | {n} | {tokens} | {wall:.2f} | {tokens / wall:,.0f} | {cpu / tokens * 1e6:.0f} | "
                  f"{ratio:.2f}× | {cpu / n * 1e3:.1f} | {ttft:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
