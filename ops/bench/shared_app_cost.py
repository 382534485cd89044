"""The ASGI app's own CPU per shared set-member POST, fast path (api.shared.fast) against the Quart route, in
one run (a benchmark, not a test): no HTTP server, no socket, a stub runtime that answers a receipt at once.

    python -m ops.bench.shared_app_cost [--requests 3000] [--rounds 2]

Each request is one ASGI call of the app `attach_shared` made (the body in one message; a disconnect
once the answer is sent, as uvicorn does), so the figure is the app's work alone: routing, authentication,
parsing the body (aotx.runtime.parse_submission), the answer's JSON, headers, request id — what the server
(ops.bench.shared_post_cost) and the runtime add come on top. Prints process CPU µs a request per round,
alternating, and the ratio of the medians.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from quart import Quart

from api.shared import attach_shared, token_sha256
from aotx.runtime import Outcome
from aotx.state.derive import lineage_for

NAME, TOKEN = "alice", "t" * 32
LINEAGE = lineage_for(NAME).hex()
RECEIPT = {"command_bytes": 181, "kind": "space.set_member", "operation": f"op-{LINEAGE}-{'1' * 32}",
           "resource": f"spc-{LINEAGE}-{'b' * 32}", "result_bytes": 0, "sequence": "1",
           "save": {"boot": "7" * 32, "commit_digest": "5" * 64, "disk_error": None, "generation": 1,
                    "incarnation": "2026-12-07T06:31:16.392085+00:00", "pending_bytes": 0, "source": "SHARED1"},
           "status": {"admission": "saved", "commit": "committed"}}
BODY = json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": LINEAGE, "operation_key": "a" * 32,
                   "sequence": "5", "participant": f"par-{'a' * 32}-{'b' * 32}", "permissions": ["read"]}).encode()
PATH = f"/aotx/v1/shared/spaces/spc-{LINEAGE}-{'c' * 32}/members"
SCOPE = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
         "path": PATH, "raw_path": PATH.encode(), "query_string": b"", "root_path": "",
         "headers": [(b"host", b"127.0.0.1:1"), (b"accept-encoding", b"identity"),
                     (b"content-length", str(len(BODY)).encode()), (b"authorization", f"Bearer {TOKEN}".encode()),
                     (b"content-type", b"application/json")],
         "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}


class StubRuntime:
    started = True

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def submit(self, actor, mutation) -> Outcome:
        return Outcome(201, RECEIPT)


async def _one(app) -> int:
    sent, done, out = [False], asyncio.get_running_loop().create_future(), []

    async def receive() -> dict:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await done
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        out.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body") and not done.done():
            done.set_result(None)

    await app(dict(SCOPE), receive, send)
    return out[0]["status"]


async def _bench(requests: int, rounds: int) -> None:
    app = Quart("bench")
    attach_shared(app, StubRuntime(), {token_sha256(TOKEN): (NAME, {"shared_read", "shared_write", "shared_manage"})},
                  media_url="")
    fast = app.extensions["aotx_shared"]["fast"]
    cpu: dict[str, list[float]] = {"fast": [], "quart": []}
    async with app.test_app():   # its startup hooks (the stub runtime's start)
        for _ in range(rounds):
            for mode in ("fast", "quart"):
                fast.on = mode == "fast"
                for _ in range(200):   # warm
                    await _one(app)
                served, t = fast.served, time.process_time()
                for _ in range(requests):
                    if await _one(app) != 201:
                        raise RuntimeError(f"{mode}: not 201")
                cpu[mode].append((time.process_time() - t) / requests)
                if (fast.served - served == requests) != fast.on:
                    raise RuntimeError(f"{mode}: the fast path answered {fast.served - served} of {requests}")
                print(f"  {mode:<6} {cpu[mode][-1] * 1e6:6.1f} µs/request  load {os.getloadavg()[0]:.1f}", flush=True)
    f, q = statistics.median(cpu["fast"]), statistics.median(cpu["quart"])
    print(f"median fast {f * 1e6:.1f} µs, quart {q * 1e6:.1f} µs a request: fast ÷ quart {f / q:.2f}×")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.bench.shared_app_cost")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    asyncio.run(_bench(args.requests, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
