"""The CPU of ops.bench.mutations' "over HTTP, 8 clients" row, a request: the server and its httpx clients in one
process, on one event loop (a benchmark, not a test).

    python -m ops.bench.inprocess_http_cost [--n 2000] [--clients 8] [--stub]

The row's process serves (api.server on uvloop, `attach_shared`, a SharedRuntime on an embedded nats-server) and
is its own client (`--clients` httpx coroutines POSTing set-member mutations, every 64th a retirement, each
answered 201), so its rate is at most 1 ÷ (server + client CPU a request). `--stub`: a runtime answering a fixed
receipt (ops.bench.shared_post_count's), so what is left is the HTTP server's half and the httpx client's. Prints
the rate and the process CPU µs a request of `--n` requests after `--n` warm ones.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

from api.server import run_serving
from ops.bench.mutations import Load, prepared_load
from ops.bench.shared_post_count import _Stub, shared_server, stub_load


async def _measure(runtime, load: Load, n: int, clients: int) -> tuple[float, float]:
    async with shared_server(runtime, load) as (_, tokens, port):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/aotx/v1/shared",
                                     limits=httpx.Limits(max_connections=clients * 2)) as http:
            async def worker(c: int) -> None:
                for i in range(n // clients):
                    name, raw, space = load.next_member(c, i)
                    path = f"/spaces/{space}/members" if space else "/participant/retirements"
                    r = await http.post(path, content=raw, headers={"Authorization": f"Bearer {tokens[name]}",
                                                                    "Content-Type": "application/json"})
                    if r.status_code != 201:
                        raise RuntimeError(f"{r.status_code} {r.text}")
                    load.seq[name] += 1

            await asyncio.gather(*(worker(c) for c in range(clients)))   # warm
            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker(c) for c in range(clients)))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu


async def _bench(n: int, clients: int, stub: bool) -> None:
    from aotx.runtime import SharedRuntime
    from aotx.state import Capacities
    from eventlog import EmbeddedNats, StreamSpec

    done = n // clients * clients
    if stub:
        wall, cpu = await _measure(_Stub(), stub_load(clients), n, clients)
    else:
        with tempfile.TemporaryDirectory(prefix="aotx-bench-") as tmp:
            async with EmbeddedNats(Path(tmp) / "nats") as server:
                runtime = SharedRuntime(server.url, StreamSpec(name="BENCH", subject_prefix="bench.j"),
                                        Capacities(participants=64), progress=False, nats_auth=server.auth())
                await runtime.start()
                wall, cpu = await _measure(runtime, await prepared_load(runtime, clients), n, clients)
                await runtime.stop()
    print(f"{'stub runtime' if stub else 'SharedRuntime'}, {clients} httpx clients in the server's process: "
          f"{done / wall:.0f}/s, process CPU {cpu / done * 1e6:.0f} µs a request", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.inprocess_http_cost")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--stub", action="store_true")
    args = ap.parse_args(argv)
    run_serving(_bench(args.n, args.clients, args.stub))
    return 0


if __name__ == "__main__":
    sys.exit(main())
