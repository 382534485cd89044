"""Benchmark (not a test): SSE fan-out — N readers following M inputs, readers' wake-ups and queries.

    .venv/bin/python -m ops.bench.sse_fanout [--readers 32] [--inputs 8] [--conversations 4]
                                             [--conversation-readers 8] [--chunks 24] [--chunk-bytes 24]

One embedded nats-server, one SharedRuntime, the shared routes on a Quart app read through its
in-process ASGI test client (no sockets). M inputs are admitted over `--conversations` conversations
of one space; `--conversation-readers` follow `/conversations/{con}/events?stream=true` (round robin
over the conversations) and `--readers` follow `/operations/{op}/events` (round robin over the inputs).
The inputs' authors are `--authors` participants (members of the space; one journal message per
author and round), the readers one principal (the space's owner). The execution is scripted, not a model: for each input its lease, `--chunks` outputs of
`--chunk-bytes` bytes and its completion are journalled through the runtime's own execution port
(`runtime.executions.journal`, the path the executor takes), the inputs all at once (or, with
`--sequential`, one after another), so the
measurement is the journal → reader path alone. It ends when every operation reader has its `end`
event; every reader's bytes are checked against what was journalled.

Prints, per applied journal message of the execution phase: reader wake-ups, reader queries
(`runtime.query` calls of the SSE routes) and the process's CPU time (runtime, readers and the
nats client; the nats-server is another process).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import tempfile
import time
from pathlib import Path

from quart import Quart

from api.shared import attach_shared, token_sha256
from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Execution, ExecutionContext, Grants, ModelCaps, MutationKind
from aotx.state.derive import lineage_for
from aotx.state.execution import InputCompleted, LeaseApplied, OutputAppended, default_lease
from aotx.state.rights import Actor
from eventlog import EmbeddedNats, StreamSpec

SCHEMA = "aotx.shared.mutation.v1"
BASE = "/aotx/v1/shared"
MODEL = "bench-model"


class Counted:
    """Counts the calls of an async method of the runtime (the routes call it through the instance)."""

    def __init__(self, fn) -> None:
        self.fn, self.calls, self.checks = fn, 0, 0

    async def __call__(self, *args, **kwargs):
        self.calls += 1
        self.checks += kwargs.get("limit") == 0   # a read of rights and status only (bytes pushed)
        return await self.fn(*args, **kwargs)


async def read_stream(client, path: str, headers: dict[str, str], until: bytes) -> bytes:
    """The body of an SSE route as it comes, until `until` is in it (then the client goes away)."""
    conn = client.request(path, method="GET", headers=headers)
    await conn.__aenter__()
    await conn.send_complete()
    data = bytearray()
    try:
        while until not in data:
            data += await conn.receive()
    finally:
        await conn.disconnect()
        try:
            await conn.__aexit__(None, None, None)
        except Exception as exc:  # the client went away mid-stream: what the app raised then is no figure
            if not type(exc).__name__.endswith("DisconnectError"):
                raise
    return bytes(data)


def sse_events(text: bytes) -> list[dict]:
    out = []
    for block in text.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":"))
        if fields:
            fields["data"] = json.loads(fields["data"])
            out.append(fields)
    return out


async def bench(args, tmp: Path) -> None:
    spec = StreamSpec(name="FANOUT", subject_prefix="fanout.j")
    async with EmbeddedNats(tmp / "nats") as server:
        runtime = SharedRuntime(server.url, spec, progress=False, nats_auth=server.auth())
        runtime.context = ExecutionContext({MODEL: ModelCaps(b"\x01" * 32)}, 8)   # inputs admitted, run by this script
        token = secrets.token_hex(16)
        app = Quart("bench")
        attach_shared(app, runtime, {token_sha256(token): ("alice", {"shared_read", "shared_write", "shared_manage"})},
                      media_url="")
        headers = {"Authorization": f"Bearer {token}"}
        seqs: dict[str, int] = {}

        async def submit(name, kind, resource=None, **fields):
            seqs[name] = seqs.get(name, 0) + 1
            raw = json.dumps({"schema": SCHEMA, "lineage": lineage_for(name).hex(),
                              "operation_key": secrets.token_hex(16), "sequence": str(seqs[name]), **fields}).encode()
            out = await submit_body(runtime, Actor(name, Grants.all()), kind, raw, resource)
            assert out.status in (201, 202), out.body
            return out.body

        async with app.test_app() as test_app:
            client = test_app.test_client()
            authors = [f"author{i}" for i in range(args.authors)]
            for name in ["alice", *authors]:
                await submit(name, MutationKind.REGISTER)
            space = (await submit("alice", MutationKind.CREATE_SPACE, scope="room"))["resource"]
            for name in authors:
                pid = (await runtime.query("participant", Actor(name, Grants.all()))).body["participant"]
                await submit("alice", MutationKind.SET_MEMBER, space, participant=pid, permissions=["read", "write"])
            cons = [(await submit("alice", MutationKind.CREATE_CONVERSATION, space))["resource"]
                    for _ in range(args.conversations)]
            per_con = [sum(1 for i in range(args.inputs) if i % len(cons) == c) for c in range(len(cons))]
            con_readers = [asyncio.ensure_future(read_stream(
                client, f"{BASE}/conversations/{cons[i % len(cons)]}/events?stream=true", headers,
                f"events@{per_con[i % len(cons)] + 1}\n".encode())) for i in range(args.conversation_readers)]
            inputs = []   # (author, receipt)
            for i in range(args.inputs):
                author = authors[i % len(authors)]
                receipt = await submit(author, MutationKind.INPUT, cons[i % len(cons)], text=f"input {i}",
                                       model=MODEL, max_output_tokens=16, temperature=0)
                inputs.append((author, receipt))

            query = runtime.query = Counted(runtime.query)
            broker = getattr(runtime, "broker", None)
            if broker is None:   # the branch point: one change signal wakes every reader
                waits = runtime.wait_change = Counted(runtime.wait_change)
            data = {r["operation"]: [secrets.token_bytes(args.chunk_bytes) for _ in range(args.chunks)]
                    for _, r in inputs}
            op_readers = [asyncio.ensure_future(read_stream(
                client, f"{BASE}/operations/{inputs[i % len(inputs)][1]['operation']}/events", headers,
                b"event: end")) for i in range(args.readers)]
            await asyncio.sleep(0.5)   # every reader is open and waiting (not timed)
            queries0, checks0 = query.calls, query.checks
            wakeups0 = broker.stats.wakeups if broker is not None else waits.calls
            messages0 = runtime.projector.messages
            cpu0, wall0 = time.process_time(), time.perf_counter()

            async def execute(author: str, receipt, slot: int) -> None:
                lineage, seq_no = lineage_for(author), int(receipt["sequence"])
                assert await runtime.executions.journal(lineage, [LeaseApplied(lineage, default_lease(lineage, seq_no, slot))]) is None
                offset = 0
                for chunk in data[receipt["operation"]]:
                    assert await runtime.executions.journal(lineage, [OutputAppended(lineage, seq_no, offset, chunk)]) is None
                    offset += len(chunk)
                assert await runtime.executions.journal(lineage, [InputCompleted(
                    lineage, seq_no, Execution.COMPLETED, 3, args.chunks, "stop")]) is None

            if args.sequential:   # one input after the other (turn taking): most readers' inputs are idle
                for i, (a, r) in enumerate(inputs):
                    await execute(a, r, i)
            else:
                await asyncio.gather(*(execute(a, r, i) for i, (a, r) in enumerate(inputs)))
            bodies = await asyncio.gather(*op_readers)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            messages = runtime.projector.messages - messages0
            queries, checks = query.calls - queries0, query.checks - checks0
            wakeups = (broker.stats.wakeups if broker is not None else waits.calls) - wakeups0
            for con in cons:   # one more input each ends the conversation readers (not timed)
                await submit("alice", MutationKind.INPUT, con, text="last", model=MODEL, max_output_tokens=16, temperature=0)
            await asyncio.gather(*con_readers)
            for i, body in enumerate(bodies):
                op = inputs[i % len(inputs)][1]["operation"]
                events = sse_events(body)
                got = b"".join(base64.b64decode(e["data"]["bytes"]) for e in events if e["event"] == "output")
                assert got == b"".join(data[op]) and events[-1]["event"] == "end", (op, events[-2:])
        await runtime.stop()
    load = os.getloadavg()
    print(f"{args.readers} operation readers over {args.inputs} inputs of {args.authors} authors, "
          f"{args.conversation_readers} conversation "
          f"readers over {args.conversations} conversations; {args.chunks} outputs × {args.chunk_bytes} B per input, "
          f"inputs {'one after another' if args.sequential else 'all at once'}")
    print(f"  applied journal messages   {messages}")
    print(f"  reader wake-ups            {wakeups:6d}  ({wakeups / messages:.2f} per message)")
    print(f"  reader queries             {queries:6d}  ({queries / messages:.2f} per message; {checks} of them "
          "rights-and-status reads delivering pushed bytes)")
    print(f"  process CPU                {cpu * 1000:8.1f} ms  ({cpu / messages * 1000:.3f} ms per message)")
    print(f"  wall                       {wall * 1000:8.1f} ms")
    print(f"  load average               {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.bench.sse_fanout")
    p.add_argument("--readers", type=int, default=32, help="operation-stream readers (default 32)")
    p.add_argument("--inputs", type=int, default=8, help="inputs followed (default 8)")
    p.add_argument("--authors", type=int, default=8, help="participants writing the inputs (default 8)")
    p.add_argument("--conversations", type=int, default=4, help="conversations the inputs go to (default 4)")
    p.add_argument("--conversation-readers", type=int, default=8, help="conversation-stream readers (default 8)")
    p.add_argument("--chunks", type=int, default=24, help="output transfers per input (default 24)")
    p.add_argument("--chunk-bytes", type=int, default=24, help="bytes per output transfer (default 24)")
    p.add_argument("--sequential", action="store_true", help="run the inputs one after another, not all at once")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aotx-bench-") as tmp:
        asyncio.run(bench(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
