"""What the HTTP side costs per streamed token with N HTTP worker processes in front of one engine process
(`aotx serve --http-workers N`'s path: api surfaces in the workers, aotx.serving_remote -> NATS ->
aotx.engine_service), against ops.bench.http_stream_cost's one process (a benchmark, not a test).

    python -m ops.bench.http_workers_cost [--workers 1,2] [--streams 16,64] [--tokens 256] [--requests 64]

No model: a scripted engine in its own process makes one token per live stream per step (one loop
turn), all of a step's deltas in one callback, as the real engine delivers; the engine service sends
them as one NATS message per worker per step. Row "direct" is the single process of today (the scripted
service in the server itself, no NATS). Prints client tok/s and server CPU µs per streamed token:
workers, engine process, nats-server, and all together, read from /proc.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import secrets
import socket
import sys
import tempfile

from aotx.engine.types import Delta
from ops.bench.http_stream_cost import ScriptedService, _load, _serve
from ops.proc_cpu import cpu_seconds


class _StepHandle:
    def __init__(self, n: int, prompt: int) -> None:
        self.request_id, self.prompt_tokens, self.max_tokens = secrets.token_hex(8), prompt, n
        self._k, self._sink, self._cancelled = 0, None, False

    def redirect(self, sink) -> None:
        self._sink = sink

    def cancel(self) -> None:
        self._cancelled = True

    def step(self) -> bool:
        """One token (or the cancellation); True when this was the last delta."""
        if self._cancelled:
            self._sink(Delta("", finish_reason="cancelled", prompt_tokens=self.prompt_tokens,
                             completion_tokens=self._k))
            return True
        self._k += 1
        last = self._k >= self.max_tokens
        self._sink(Delta(" tok", token_ids=(self._k,), finish_reason="length" if last else None,
                         prompt_tokens=self.prompt_tokens, completion_tokens=self._k))
        return last


class ScriptedEngine(ScriptedService):
    """What aotx.engine_service needs of a ModelService: submit() -> a handle that can be redirected."""

    def __init__(self) -> None:
        self.live: list[_StepHandle] = []
        self._wake: asyncio.Event | None = None

    def submit(self, prompt_ids, params, *, surface, lane):
        handle = _StepHandle(params.max_tokens, len(prompt_ids))
        self.live.append(handle)
        if self._wake is None:
            self._wake = asyncio.Event()
            asyncio.get_running_loop().create_task(self._steps())
        self._wake.set()
        return handle

    async def _steps(self) -> None:
        while True:
            if not self.live:
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(0)   # the handles' redirect happens in submit's caller, before the first step
            self.live = [h for h in self.live if h._sink is None or not h.step()]


def _engine(nats_url: str, name: str, ready) -> None:
    from aotx.engine_service import EngineService

    async def run() -> None:
        await EngineService(ScriptedEngine(), nats_url, name).start()
        ready.put(os.getpid())
        await asyncio.Event().wait()

    asyncio.run(run())


def _worker(nats_url: str, name: str, port: int, ready) -> None:
    from quart import Quart

    from aotx.serving_remote import EngineClient
    from api.app_common import install_common
    from api.server import run_serving, serve_app
    from api.surfaces import chat

    async def run() -> None:
        client = await EngineClient(nats_url, name).start()
        service = ScriptedService()
        service.submit_batch = client.submit   # what RemoteModelService.submit_batch does, less the route count
        app = Quart(__name__)
        app.extensions["aotx"] = service
        app.register_blueprint(chat.blueprint)
        install_common(app)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
        ready.put(os.getpid())
        await serve_app(app, "127.0.0.1", port, asyncio.Event(), sock=sock)

    run_serving(run())   # on uvloop, as ops.http_worker serves


def _measure(base: str, pids: list[int], streams: list[int], requests: int, tokens: int) -> list[tuple]:
    rows = []
    for s in streams:
        before = [cpu_seconds(p) for p in pids]
        got, wall = asyncio.run(_load(base, s, max(requests, s), tokens))
        rows.append((s, got, wall, [cpu_seconds(p) - b for p, b in zip(pids, before)]))
    return rows


def _direct(streams: list[int], requests: int, tokens: int) -> list[tuple]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(q, None), daemon=True)   # on uvicorn + uvloop, as `aotx serve`
    proc.start()
    try:
        return [(s, got, wall, [cpu[0], 0.0, 0.0]) for s, got, wall, cpu in
                _measure(f"http://127.0.0.1:{q.get(timeout=60)}", [proc.pid], streams, requests, tokens)]
    finally:
        proc.terminate()
        proc.join(10)


def _with_workers(n: int, streams: list[int], requests: int, tokens: int) -> list[tuple]:
    from eventlog import EmbeddedNats

    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="aotx-workers-cost-") as var, EmbeddedNats(var) as nats:
        name, q = secrets.token_hex(4), ctx.Queue()
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)   # holds the port; never listens
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        procs = [ctx.Process(target=_engine, args=(nats.client_url(), name, q), daemon=True)]
        procs += [ctx.Process(target=_worker, args=(nats.client_url(), name, port, q), daemon=True) for _ in range(n)]
        for p in procs:
            p.start()
        try:
            for _ in procs:
                q.get(timeout=120)
            probe.close()
            rows = _measure(f"http://127.0.0.1:{port}", [p.pid for p in procs] + [nats.pid], streams, requests,
                            tokens)
            # columns: workers, engine process, nats-server
            return [(s, got, wall, [sum(cpu[1:-1]), cpu[0], cpu[-1]]) for s, got, wall, cpu in rows]
        finally:
            for p in procs:
                p.terminate()
                p.join(10)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,2", help="worker counts to run besides the direct single process")
    ap.add_argument("--streams", default="16,64")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--requests", type=int, default=64)
    args = ap.parse_args(argv)
    streams = [int(x) for x in args.streams.split(",")]
    table = [("direct", _direct(streams, args.requests, args.tokens))]
    for n in [int(x) for x in args.workers.split(",") if x]:
        table.append((f"{n} worker{'s' if n > 1 else ''}", _with_workers(n, streams, args.requests, args.tokens)))
    print(f"\n## HTTP workers: server CPU per streamed token (scripted engine), load {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} cores\n")
    print("| server | streams | tokens | client tok/s | CPU µs/token: HTTP (workers) | engine process | nats-server "
          "| all |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, rows in table:
        for s, got, wall, (http, engine, nats) in rows:
            us = [c / max(got, 1) * 1e6 for c in (http, engine, nats)]
            print(f"| {label} | {s} | {got} | {got / wall:,.0f} | {us[0]:.0f} | {us[1]:.0f} | {us[2]:.0f} | "
                  f"{sum(us):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
