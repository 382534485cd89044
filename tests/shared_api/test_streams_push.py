"""The shared SSE streams on the broker (api/shared/streams.py over aotx.runtime.broker), a real
nats-server and runtime; the inputs' execution is journalled by the test through the runtime's own
execution port (the executor's path), so every byte and its timing is known.

A conversation reader is not woken by traffic in another conversation; an operation stream's bytes
are pushed from the applied output events, in order and identical to `/result` reads at the same
offsets; a reader too slow for its queue resyncs and still gets every byte."""

from __future__ import annotations

import base64

from api.drain import Drain
from api.shared.streams import operation_stream
from aotx.state import Actor, Execution, ExecutionContext, Grants, IdKind, ModelCaps, lineage_for, parse_id
from aotx.state import operation_sequence
from aotx.state.execution import InputCompleted, LeaseApplied, OutputAppended, default_lease
from tests.waiting import open_stream, wait_until_async

from .harness import BASE, fresh_spec, shared_app
from .test_inputs import _sse_events as _events

MODEL = "scripted"


async def _world(runtime, p):
    """alice's room space with conversations A and B; bob reads there. Inputs are admitted (a model
    context without a model) and executed by `_execute`."""
    runtime.context = ExecutionContext({MODEL: ModelCaps(b"\x01" * 32)}, 8)
    alice, bob = p["alice"], p["bob"]
    for who in (alice, bob):
        await who.sync()
        assert (await who.post("/participant", who.body()))[0] == 201
    space = (await alice.post("/spaces", alice.body(scope="room")))[1]["resource"]
    cons = [(await alice.post(f"/spaces/{space}/conversations", alice.body()))[1]["resource"] for _ in range(2)]
    bob_id = (await bob.sync())["participant"]
    assert (await alice.post(f"/spaces/{space}/members", alice.body(participant=bob_id, permissions=["read"])))[0] == 201
    return cons


async def _input(alice, con: str) -> str:
    status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(text="hi", model=MODEL))
    assert status == 202, receipt
    return receipt["operation"]


def _key(op: str) -> tuple[bytes, int]:
    return lineage_for("alice"), operation_sequence(parse_id(op, IdKind.OPERATION).ident)


async def _lease(runtime, op: str) -> None:
    lineage, seq = _key(op)
    assert await runtime.executions.journal(lineage, [LeaseApplied(lineage, default_lease(lineage, seq, 0))]) is None


async def _output(runtime, op: str, offset: int, data: bytes) -> int:
    lineage, seq = _key(op)
    assert await runtime.executions.journal(lineage, [OutputAppended(lineage, seq, offset, data)]) is None
    return offset + len(data)


async def _complete(runtime, op: str, outputs: int) -> None:
    lineage, seq = _key(op)
    assert await runtime.executions.journal(lineage, [InputCompleted(lineage, seq, Execution.COMPLETED, 2, outputs,
                                                                     "stop")]) is None


def _sub(runtime, label: str):
    return next(s for s in runtime.broker.subscriptions() if s.label == label)


async def test_a_conversation_reader_is_not_woken_by_traffic_in_another(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, client):
        con_a, con_b = await _world(runtime, p)
        alice, bob = p["alice"], p["bob"]
        async with open_stream(client, f"{BASE}/conversations/{con_a}/events?stream=true", bob.headers) as a, \
                open_stream(client, f"{BASE}/conversations/{con_b}/events?stream=true", bob.headers) as b:
            assert await a.started() == 200 and await b.started() == 200
            sub_a, sub_b = _sub(runtime, con_a), _sub(runtime, con_b)
            op = await _input(alice, con_b)
            await wait_until_async(lambda: "event: input" in b.text, "the input on B's stream")
            await _lease(runtime, op)
            offset = 0
            for chunk in (b"a", b"b", b"c"):
                offset = await _output(runtime, op, offset, chunk)
            await _complete(runtime, op, 3)
            op2 = await _input(alice, con_b)
            await wait_until_async(lambda: b.text.count("event: input") == 2, "the second input on B's stream")
            assert (sub_a.wakeups, sub_a.reads) == (0, 0), "A's reader was woken by B's traffic"
            assert sub_b.reads == sub_b.wakeups == 2    # B's admissions only: its inputs' execution is not its news
            assert "event: input" not in a.text
            await _lease(runtime, op2)
            await _complete(runtime, op2, 0)


async def test_operation_bytes_are_pushed_in_order_identical_to_result_reads(nats_url):
    text = "pushed: héllo wörld, ünïcode split across outputs ✓".encode()
    chunks = [text[i:i + 5] for i in range(0, len(text), 5)]   # some end inside a character
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, client):
        con, _ = await _world(runtime, p)
        alice, bob = p["alice"], p["bob"]
        op = await _input(alice, con)
        async with open_stream(client, f"{BASE}/operations/{op}/events", bob.headers) as stream:
            assert await stream.started() == 200
            sub = _sub(runtime, op)
            await _lease(runtime, op)
            offset = 0
            for chunk in chunks:
                offset = await _output(runtime, op, offset, chunk)
                await wait_until_async(lambda: f"/events@{offset}\n" in stream.text, f"byte {offset} on the stream")
            await _complete(runtime, op, len(chunks))
            events = _events(await stream.finish())
        assert sub.pushes == sub.reads == len(chunks) + 1 and sub.resyncs == 0   # every read a rights check
        outputs = [e for e in events if e["event"] == "output"]
        assert len(outputs) == len(chunks) and events[-1]["event"] == "end"
        at = 0
        for e in outputs:
            d = e["data"]
            status, read = await bob.get(f"/operations/{op}/result?offset={d['offset']}&limit={d['byte_length']}")
            assert status == 200
            assert d["offset"] == at and {k: read[k] for k in d} == d   # byte-identical, text included
            at = d["next_offset"]
            assert e["id"] == f"{BASE}/operations/{op}/events@{at}"
        assert b"".join(base64.b64decode(e["data"]["bytes"]) for e in outputs) == text
        status, whole = await bob.get(f"/operations/{op}/result")
        end = events[-1]["data"]
        assert end == {k: whole[k] for k in end} and end["saved_bytes"] == len(text)


async def test_a_slow_reader_that_overflows_its_queue_still_gets_every_byte(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, _):
        con, _ = await _world(runtime, p)
        op = await _input(p["alice"], con)
        bob = Actor("bob", Grants.all())
        runtime.broker.queue_size = 2
        sub = runtime.broker.operation(op)
        first = await runtime.query("result", bob, op=op, offset=0)
        stream = operation_stream(runtime, sub, op, 0, first, lambda: bob, Drain())
        await _lease(runtime, op)
        offset = await _output(runtime, op, 0, b"first ")
        got = [await stream.__anext__()]               # pushed; the reader now stops reading a while
        for i in range(12):
            offset = await _output(runtime, op, offset, f"chunk{i} ".encode())
        await _complete(runtime, op, 13)
        assert sub.overflowed and runtime.broker.stats.overflows == 1   # the writer never waited
        got += [chunk async for chunk in stream]
        events = _events(b"".join(got).decode())
        data = b"".join(base64.b64decode(e["data"]["bytes"]) for e in events if e["event"] == "output")
        status, whole = await p["bob"].get(f"/operations/{op}/result")
        assert status == 200 and data == base64.b64decode(whole["bytes"]) and len(data) == offset
        assert events[-1]["event"] == "end" and sub.resyncs == 1 and sub.closed
