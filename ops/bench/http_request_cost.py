"""What the HTTP server + Quart cost per small non-streamed POST (a benchmark, not a test).

    python -m ops.bench.http_request_cost [--clients 8] [--requests 300] [--servers hypercorn,uvicorn] [--rounds 1]

The server (ops.bench.server_variants: `uvicorn` is what `aotx serve` runs, `hypercorn` the former one)
runs in a child process; `--clients` client processes (one keep-alive `http.client` connection each,
started together) POST `--requests` requests each, waiting for every answer, to two routes:

* `bare`: a Quart route that reads its small JSON body and answers `{"ok": true}` 201 (server + Quart);
* `chat`: `/v1/chat/completions`, `stream: false`, `max_tokens: 1`, over ops.bench.http_stream_cost's
  scripted service (server + Quart + the chat surface's parse, validation and response).

Prints requests/s and the server process's CPU µs per request (from /proc), the median of `--rounds`
alternating rounds, and the CPU ratio to the first server of `--servers` in the same run.
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import sys
import time

from ops.proc_cpu import cpu_seconds

CHAT = json.dumps({"model": "smollm2-135m-instruct", "max_tokens": 1,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
ROUTES = (("bare", "/bare", b'{"x": 1}'), ("chat", "/v1/chat/completions", CHAT))
WARM = 3


def _serve(port_q, server: str) -> None:
    from quart import Quart, request

    from api.app_common import install_common
    from api.server import bind_socket
    from api.surfaces import chat
    from ops.bench.http_stream_cost import ScriptedService
    from ops.bench.server_variants import serve_variant

    app = Quart(__name__)
    app.extensions["aotx"] = ScriptedService()
    app.register_blueprint(chat.blueprint)
    install_common(app)

    @app.post("/bare")
    async def bare():
        await request.get_data()   # read it: hypercorn closes a keep-alive connection whose body was left unread
        return {"ok": True}, 201

    sock = bind_socket("127.0.0.1", 0)
    port_q.put(sock.getsockname()[1])
    serve_variant(server, app, sock)


def _client(port: int, path: str, body: bytes, n: int, start, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    for k in range(WARM + n):
        if k == WARM:
            start.wait()
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        if r.status not in (200, 201):
            out.put(f"{path}: {r.status} {data[:200]!r}")
            return
    out.put(time.perf_counter())
    conn.close()


def _one_server(server: str, clients: int, requests: int) -> dict[str, tuple[float, float]]:
    """route -> (requests/s, server CPU seconds a request)"""
    spawn, fork = mp.get_context("spawn"), mp.get_context("fork")
    q = spawn.Queue()
    proc = spawn.Process(target=_serve, args=(q, server), daemon=True)
    proc.start()
    port, out = q.get(timeout=60), {}
    try:
        for name, path, body in ROUTES:
            start, done = fork.Barrier(clients + 1), fork.Queue()
            procs = [fork.Process(target=_client, args=(port, path, body, requests, start, done))
                     for _ in range(clients)]
            for p in procs:
                p.start()
            start.wait()
            before, t0 = cpu_seconds(proc.pid), time.perf_counter()
            ends = [done.get(timeout=300) for _ in procs]
            cpu = cpu_seconds(proc.pid) - before
            for p in procs:
                p.join(10)
            bad = [e for e in ends if isinstance(e, str)]
            if bad:
                raise RuntimeError(f"{server}: {bad[0]}")
            out[name] = (clients * requests / (max(ends) - t0), cpu / (clients * requests))
    finally:
        proc.terminate()
        proc.join(10)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.http_request_cost")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=300, help="per client")
    ap.add_argument("--servers", default="hypercorn,uvicorn",
                    help="comma-separated, of ops.bench.server_variants.SERVERS; ratios are to the first")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args(argv)
    servers = args.servers.split(",")
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = []
    for _ in range(args.rounds):
        for server in servers:
            for route, row in _one_server(server, args.clients, args.requests).items():
                runs.setdefault((server, route), []).append(row)
            loads.append(os.getloadavg()[0])

    def median(server: str, route: str) -> tuple[float, float]:
        rows = sorted(runs[(server, route)], key=lambda r: r[1])
        return rows[len(rows) // 2]

    print(f"\n## HTTP cost per small POST ({args.clients} client processes, {args.requests} requests each), "
          f"median of {args.rounds} round(s), load {min(loads):.1f}–{max(loads):.1f}, {os.cpu_count()} cores\n")
    print(f"| server | route | requests/s | server CPU µs/request | ÷ {servers[0]} |")
    print("|---|---|---:|---:|---:|")
    for route, _, _ in ROUTES:
        for server in servers:
            rate, cpu = median(server, route)
            print(f"| {server} | {route} | {rate:,.0f} | {cpu * 1e6:.0f} | {cpu / median(servers[0], route)[1]:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
