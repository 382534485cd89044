"""Benchmark (not a test): durable shared mutations/s against raw JetStream publish, and replay rate.

    .venv/bin/python -m ops.bench.mutations [--n 2000] [--clients 8] [--client-processes]

One embedded nats-server (file storage, sync_interval always), and in the same run:

* raw: nats-py `js.publish` of messages the size of the runtime's journal messages, awaited acks,
  one at a time and with `--clients` publishers in flight, on a stream with the journal's settings;
* inside the runtime: `SharedRuntime.submit` (parse → decide → journal append with msg id and
  expected last subject sequence → apply on the ack), one client and `--clients` participants
  concurrently (with pipelined command rounds, then one round at a time: aotx.runtime.pipeline) (set-member mutations and, every 64th sequence, a retirement, so the default
  1024-receipt table never fills; every one admitted: 201);
* over HTTP: the same through api.server (uvicorn) + Quart (`attach_shared`) with httpx clients in this process
  (and, with `--client-processes`, from one process per client: ops.bench.http_clients);
* replay: a new runtime's boot (every message through the reassembler and apply) against a raw
  ordered-consumer read of the same stream.

Prints admitted mutations/s, p50/p99 latency and the ratio to raw publish. The whole bench runs on one event
loop: uvloop (`--loop uvloop`, the default: what `aotx serve` runs on, api.server.run_serving) or asyncio's.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import tempfile
import time
from pathlib import Path

import httpx
from quart import Quart

from api.server import run_serving, serve_app
from api.shared import attach_shared, token_sha256
from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Capacities, Grants, MutationKind
from aotx.state.derive import lineage_for
from aotx.state.rights import Actor
from eventlog import EmbeddedNats, StreamSpec, connect
from ops.bench.http_clients import Job, post_all

SCHEMA = "aotx.shared.mutation.v1"
ALL = {"shared_read", "shared_write", "shared_manage"}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def line(label: str, n: int, wall: float, lat: list[float], raw_rate: float | None = None) -> float:
    rate = n / wall
    ratio = f"  {rate / raw_rate:5.2f}× raw" if raw_rate else ""
    print(f"  {label:<44} {rate:8.0f}/s  p50 {pct(lat, .5):6.2f} ms  p99 {pct(lat, .99):6.2f} ms{ratio}",
          flush=True)
    return rate


async def concurrent(clients: int, per_client: int, op) -> tuple[float, list[float]]:
    lat: list[float] = []

    async def worker(c: int) -> None:
        for i in range(per_client):
            t = time.perf_counter()
            await op(c, i)
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in range(clients)))
    return time.perf_counter() - t0, lat


class Load:
    """Participants p0..pK, each owning a space; mutations toggle another participant's rights there."""

    def __init__(self, k: int) -> None:
        self.names = [f"p{i}-{secrets.token_hex(4)}" for i in range(k)]
        self.seq = {n: 1 for n in self.names}
        self.space: dict[str, str] = {}
        self.pid: dict[str, str] = {}
        self._lineage: dict[str, str] = {}

    def body(self, name: str, **fields) -> bytes:
        """The JSON body of `name`'s next mutation with `fields` (the bench's client work: a participant's
        lineage hex kept, the JSON written by one f-string where every value is a plain string or a list
        of them, as json.dumps writes it; else json.dumps)."""
        lineage = self._lineage.get(name)
        if lineage is None:
            lineage = self._lineage[name] = lineage_for(name).hex()
        head = (f'{{"schema": "{SCHEMA}", "lineage": "{lineage}", "operation_key": "{secrets.token_hex(16)}", '
                f'"sequence": "{self.seq[name]}"')
        parts = [head]
        for key, value in fields.items():
            text = _plain_json(value)
            if text is None:
                return json.dumps({**json.loads(head + "}"), **fields}).encode()
            parts.append(f'"{key}": {text}')
        return (", ".join(parts) + "}").encode()

    def next_member(self, c: int, i: int) -> tuple[str, bytes, str | None]:
        """A set-member mutation, or every 64th sequence a retirement of everything below it."""
        name = self.names[c]
        if self.seq[name] % 64 == 0:
            return name, self.body(name, retry_floor=str(self.seq[name])), None
        other = self.names[(c + 1) % len(self.names)]
        perms = ["read"] if i % 2 else ["read", "write"]
        return name, self.body(name, participant=self.pid[other], permissions=perms), self.space[name]


async def setup(load: Load, submit) -> None:
    for n in load.names:
        await submit(n, MutationKind.REGISTER, load.body(n), None)
        load.seq[n] += 1
    for n in load.names:
        r = await submit(n, MutationKind.CREATE_SPACE, load.body(n, scope="private"), None)
        load.seq[n] += 1
        load.space[n] = r["resource"]


def _plain_json(value) -> str | None:
    """`value` as json.dumps writes it, where it is a string (or a list of strings) that JSON writes as it
    is (printable ASCII without a quote or backslash); else None."""
    if isinstance(value, str):
        return f'"{value}"' if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value \
            else None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [_plain_json(v) for v in value]
        return None if None in items else "[" + ", ".join(items) + "]"
    return None


def submitter(runtime):
    """`submit(name, kind, raw, space)` through the runtime as `name` with every grant; anything but a 201
    stops the bench."""
    async def submit(name, kind, raw, space):
        out = await submit_body(runtime, Actor(name, Grants.all()), kind, raw, space)
        if out.status != 201:
            raise RuntimeError(f"{kind}: {out.status} {out.body}")
        return out.body
    return submit


async def prepared_load(runtime, clients: int) -> Load:
    """`clients` participants registered in `runtime`, each with a private space and its participant id."""
    load = Load(clients)
    await setup(load, submitter(runtime))
    for name in load.names:
        me = await runtime.query("participant", Actor(name, Grants.all()))
        load.pid[name] = me.body["participant"]
    return load


def http_jobs(load: Load, tokens: dict[str, str], c: int, count: int) -> Job:
    """Client `c`'s next `count` mutations as HTTP requests, in order (each is expected to be admitted)."""
    job: Job = []
    for i in range(count):
        name, raw, space = load.next_member(c, i)
        path = f"/aotx/v1/shared/spaces/{space}/members" if space else "/aotx/v1/shared/participant/retirements"
        job.append((path, raw, {"Authorization": f"Bearer {tokens[name]}", "Content-Type": "application/json"}))
        load.seq[name] += 1
    return job


async def bench(n: int, clients: int, tmp: Path, client_processes: bool = False) -> None:
    spec = StreamSpec(name="BENCH", subject_prefix="bench.j")
    caps = Capacities(participants=64)   # the defaults otherwise (1024 receipts): every 64th mutation retires
    async with EmbeddedNats(tmp / "nats") as server:
        url, auth = server.url, server.auth()
        runtime = SharedRuntime(url, spec, caps, progress=False, nats_auth=auth)
        await runtime.start()

        submit = submitter(runtime)
        load = await prepared_load(runtime, clients)
        # the size of one journal message of a set-member mutation
        probe_name, probe_raw, probe_space = load.next_member(0, 0)
        before = runtime.projector.messages
        await submit(probe_name, MutationKind.SET_MEMBER if probe_space else MutationKind.RETIRE, probe_raw,
                     probe_space)
        load.seq[probe_name] += 1
        msgs = [m async for m in runtime.recorder.read(1)]
        size = len(msgs[-1].data)
        assert runtime.projector.messages == before + 1

        # ---- raw JetStream publish on a stream with the journal's settings ----
        nc = await connect(url, auth, name="aotx-bench")
        js = nc.jetstream()
        raw_spec = StreamSpec(name="BENCHRAW", subject_prefix="raw.j")
        await js.add_stream(raw_spec.config())
        payload = secrets.token_bytes(size)
        counter = iter(range(1 << 30))

        async def raw_pub(c, i):
            await js.publish(f"raw.j.c{c}.tick", payload, headers={"Nats-Msg-Id": f"m{next(counter)}"})

        print(f"nats-server (file storage, sync_interval always), {size}-byte journal messages, n={n}", flush=True)
        wall, lat = await concurrent(1, n, raw_pub)
        raw1 = line("raw js.publish, 1 in flight", n, wall, lat)
        wall, lat = await concurrent(clients, n // clients, raw_pub)
        rawk = line(f"raw js.publish, {clients} in flight", n // clients * clients, wall, lat)

        # ---- inside the runtime ----
        async def rt_op(c, i):
            name, raw, space = load.next_member(c, i)
            await submit(name, MutationKind.SET_MEMBER if space else MutationKind.RETIRE, raw, space)
            load.seq[name] += 1

        wall, lat = await concurrent(1, n, rt_op)
        line("runtime submit, 1 client", n, wall, lat, raw1)
        wall, lat = await concurrent(clients, n // clients, rt_op)
        line(f"runtime submit, {clients} clients", n // clients * clients, wall, lat, rawk)
        depth, runtime.commands.split = runtime.commands.depth, True   # peers: split in cohorts; one round at a time
        wall, lat = await concurrent(clients, n // clients, rt_op)
        line("  the same, a queue split in two cohorts", n // clients * clients, wall, lat, rawk)
        runtime.commands.depth, runtime.commands.split = 1, False
        wall, lat = await concurrent(clients, n // clients, rt_op)
        line("  the same, one round at a time", n // clients * clients, wall, lat, rawk)
        runtime.commands.depth = depth

        # ---- over HTTP (api.server + Quart, httpx in this process) ----
        tokens = {name: secrets.token_hex(16) for name in load.names}
        app = Quart("bench")
        attach_shared(app, runtime, {token_sha256(t): (name, ALL) for name, t in tokens.items()})
        stop = asyncio.Event()
        ready = asyncio.Event()
        port = {}

        def on_ready(host, p):
            port["p"] = p
            ready.set()

        serving = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop, on_ready=on_ready))
        await ready.wait()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port['p']}/aotx/v1/shared",
                                     limits=httpx.Limits(max_connections=clients * 2)) as http:
            async def http_op(c, i):
                name, raw, space = load.next_member(c, i)
                path = f"/spaces/{space}/members" if space else "/participant/retirements"
                r = await http.post(path, content=raw,
                                    headers={"Authorization": f"Bearer {tokens[name]}",
                                             "Content-Type": "application/json"})
                if r.status_code != 201:
                    raise RuntimeError(f"{r.status_code} {r.text}")
                load.seq[name] += 1

            await http_op(0, 1)  # warm the connection
            m = n // 2
            wall, lat = await concurrent(1, m, http_op)
            line("over HTTP, 1 client", m, wall, lat, raw1)
            wall, lat = await concurrent(clients, m // clients, http_op)
            line(f"over HTTP, {clients} clients", m // clients * clients, wall, lat, rawk)
            if client_processes:   # the same requests from processes of their own (http.client, keep-alive)
                jobs = [http_jobs(load, tokens, c, m // clients) for c in range(clients)]
                wall, lat = await post_all(port["p"], jobs)
                line(f"over HTTP, {clients} client processes", m // clients * clients, wall, lat, rawk)
        stop.set()
        await serving
        await runtime.stop()

        # ---- replay: a runtime's boot against a raw ordered-consumer read ----
        info = await js.stream_info(spec.name)
        total = info.state.messages
        t = time.perf_counter()
        got = 0
        done = asyncio.Event()

        async def cb(msg):
            nonlocal got
            got += 1
            if got >= total:
                done.set()

        sub = await js.subscribe(f"{spec.subject_prefix}.>", stream=spec.name, ordered_consumer=True, cb=cb)
        await done.wait()
        raw_read = time.perf_counter() - t
        await sub.unsubscribe()
        t = time.perf_counter()
        fresh = SharedRuntime(url, spec, caps, progress=False, nats_auth=auth)
        await fresh.start()
        boot = time.perf_counter() - t
        assert fresh.projector.messages == total
        await fresh.stop()
        print(f"  replay of {total} messages: raw ordered consumer {total / raw_read:8.0f} msg/s; runtime boot "
              f"{total / boot:8.0f} msg/s ({fresh.projector.transfers} transfers, {(total / boot) / (total / raw_read):.2f}× raw)",
              flush=True)
        await nc.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.bench.mutations")
    p.add_argument("--n", type=int, default=2000, help="mutations per runtime measurement (default 2000)")
    p.add_argument("--clients", type=int, default=8, help="concurrent clients / publishers (default 8)")
    p.add_argument("--client-processes", action="store_true",
                   help="also measure HTTP with each client in a process of its own (ops.bench.http_clients)")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                   help="the event loop of the whole bench (default uvloop, as `aotx serve`)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aotx-bench-") as tmp:
        run = run_serving if args.loop == "uvloop" else asyncio.run
        print(f"event loop: {args.loop}")
        run(bench(args.n, args.clients, Path(tmp), args.client_processes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
