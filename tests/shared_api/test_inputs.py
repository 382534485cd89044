"""Shared inputs end to end: a real nats-server, the real model (numpy/auto backend, tiny budgets).

Post an input → admission saved (202) → lease → output transfers → completion; result bytes at
offsets; the SSE stream (and Last-Event-ID resume); exact retry runs nothing twice; a read member
reads the result, a non-member gets 404; cancellation; a restart turns an unfinished admission
into `interrupted` and never runs it again; a runtime without a model refuses inputs.
"""

from __future__ import annotations

import base64
import json

import pytest

from aotx.journal import Reassembler, TransferKind
from tests.waiting import open_stream, wait_until_async

from .harness import BASE, fresh_spec, shared_app

TERMINAL = ("completed", "cancelled", "interrupted", "failed")


async def _setup(p, bob_rights=("read",)):
    """alice owns a room space with one conversation; bob is a member with `bob_rights` (read);
    carol is registered only."""
    alice, bob, carol = p["alice"], p["bob"], p["carol"]
    for who in (alice, bob, carol):
        await who.sync()
        assert (await who.post("/participant", who.body()))[0] == 201
    status, sp = await alice.post("/spaces", alice.body(scope="room"))
    assert status == 201
    status, conv = await alice.post(f"/spaces/{sp['resource']}/conversations", alice.body())
    assert status == 201
    bob_id = (await bob.sync())["participant"]
    status, _ = await alice.post(f"/spaces/{sp['resource']}/members",
                                 alice.body(participant=bob_id, permissions=list(bob_rights)))
    assert status == 201
    return sp["resource"], conv["resource"]


async def _wait(party, op: str, states=TERMINAL) -> dict:
    async def receipt() -> dict:
        status, body = await party.get(f"/operations/{op}")
        assert status == 200, body
        return body
    return await wait_until_async(receipt, f"{op} to be {' or '.join(states)}",
                                  done=lambda r: r["execution"] in states)


def _stream(party, path: str, headers: dict[str, str] | None = None):
    """An SSE route of `party`, read as it comes (tests.waiting.open_stream)."""
    return open_stream(party.client, BASE + path, {**party.headers, **(headers or {})})


def _sse_events(text: str) -> list[dict]:
    out = []
    for block in text.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        event = {}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            event[name] = json.loads(value) if name == "data" else value
        out.append(event)
    return out


async def _transfers(runtime) -> list:
    r = Reassembler(recovery=True)
    done = []
    async for msg in runtime.recorder.read(1):
        done.extend(r.feed_message(msg.data, position=msg.seq))
    return done


async def test_input_result_events_retry_readers(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob, carol = p["alice"], p["bob"], p["carol"]
        space, con = await _setup(p)
        status, caps = await alice.get("/capabilities")
        assert caps["routes"]["inputs"] is True and caps["page_grant"] >= 1
        assert caps["models"][0]["id"] == service.model_id and caps["models"][0]["media"] is False

        body = alice.body(text="Name one colour.", model=service.model_id, max_output_tokens=6)
        status, receipt = await alice.post(f"/conversations/{con}/inputs", body)
        assert status == 202, receipt
        assert receipt["kind"] == "conversation.input" and receipt["status_code"] == 202
        assert receipt["status"]["admission"] == "saved" and receipt["status"]["terminal"] == "pending"
        assert receipt["execution"] in ("queued", "running")
        assert receipt["model_digest"] == service.bundle.sha256 and receipt["page_limit"] == caps["page_grant"]
        op = receipt["operation"]

        done = await _wait(alice, op)
        assert done["execution"] == "completed" and done["status"]["terminal"] == "saved", done["result"]
        res = done["result"]
        assert res["finish"] in ("stop", "length") and 1 <= res["output_tokens"] <= 6 and res["input_tokens"] > 3
        assert done["lease"] == {"slot": 0, "revision": 3, "retention_mode": 1}

        # exact retry: the same receipt, nothing runs again (one admission, one lease, one completion)
        status, again = await alice.post(f"/conversations/{con}/inputs", body)
        assert (status, again) == (200, done)
        kinds = [t.kind for t in await _transfers(runtime)]
        assert (kinds.count(TransferKind.ADMISSION), kinds.count(TransferKind.LEASE),
                kinds.count(TransferKind.COMPLETION)) == (1, 1, 1)
        # changed input under the same sequence: 409
        status, err = await alice.post(f"/conversations/{con}/inputs", {**body, "text": "Other."})
        assert status == 409, err

        # result bytes at offsets
        status, whole = await alice.get(f"/operations/{op}/result")
        assert status == 200
        data = base64.b64decode(whole["bytes"])
        assert whole["byte_length"] == len(data) == res["byte_length"] > 0 and whole["next_offset"] == len(data)
        assert whole["text"] == data.decode("utf-8") and whole["complete"] is True
        assert (whole["input_tokens"], whole["output_tokens"], whole["finish"]) == (
            res["input_tokens"], res["output_tokens"], res["finish"])
        pieces, offset = b"", 0
        while offset < len(data):
            status, span = await alice.get(f"/operations/{op}/result?offset={offset}&limit=3")
            assert status == 200 and span["offset"] == offset and span["byte_length"] <= 3
            pieces += base64.b64decode(span["bytes"])
            offset = span["next_offset"]
        assert pieces == data
        status, tail = await alice.get(f"/operations/{op}/result?offset={len(data)}")
        assert status == 200 and tail["byte_length"] == 0 and tail["text"] == ""
        assert (await alice.get(f"/operations/{op}/result?offset={len(data) + 1}"))[0] == 416

        # SSE: every output event, then the terminal event; Last-Event-ID resumes at its byte cursor
        status, stream = await alice.get(f"/operations/{op}/events")
        assert status == 200
        events = _sse_events(stream)
        outputs = [e for e in events if e["event"] == "output"]
        assert b"".join(base64.b64decode(e["data"]["bytes"]) for e in outputs) == data
        assert events[-1]["event"] == "end" and events[-1]["data"]["execution"] == "completed"
        assert events[-1]["id"].endswith(f"/operations/{op}/events@{len(data)}")
        cut = max(1, len(data) // 2)
        status, resumed = await alice.get(f"/operations/{op}/events",
                                          headers={"Last-Event-ID": f"/aotx/v1/shared/operations/{op}/events@{cut}"})
        got = _sse_events(resumed)
        assert b"".join(base64.b64decode(e["data"]["bytes"]) for e in got if e["event"] == "output") == data[cut:]

        # a read member reads another member's result (its sequence null); a non-member gets 404
        status, seen = await bob.get(f"/operations/{op}")
        assert status == 200 and seen["sequence"] is None and seen["execution"] == "completed"
        status, bob_res = await bob.get(f"/operations/{op}/result")
        assert status == 200 and bob_res["bytes"] == whole["bytes"]
        assert (await bob.get(f"/operations/{op}/events"))[0] == 200
        for path in (f"/operations/{op}", f"/operations/{op}/result", f"/operations/{op}/events"):
            assert (await carol.get(path))[0] == 404
        # bob may read but not write
        status, err = await bob.post(f"/conversations/{con}/inputs",
                                     bob.body(text="hi", model=service.model_id, max_output_tokens=2))
        assert status == 403, err


async def test_refusals_and_cancellation(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice = p["alice"]
        _, con = await _setup(p)
        path = f"/conversations/{con}/inputs"
        status, up = await alice.post_blob(b"\x89PNG fake image", "image/png")
        assert status == 201, up
        media = [{"type": "image", "sha256": up["sha256"]}]
        status, err = await alice.post(path, alice.body(text="look", model=service.model_id, media=media))
        assert status == 409 and "media capability" in err["error"]["message"]
        for bad in ({"text": "", "model": service.model_id}, {"text": "x" * 2049, "model": service.model_id},
                    {"text": "x" * (2048 - 72), "model": service.model_id, "media": media},
                    {"text": "x", "model": service.model_id, "media": [{"type": "video", "sha256": "ab" * 32}]},
                    {"text": "x", "model": service.model_id, "media": media * 9},
                    {"text": "x", "model": service.model_id, "temperature": -1},
                    {"text": "x", "model": service.model_id, "top_p": 0},
                    {"text": "x", "model": service.model_id, "max_output_tokens": 0},
                    {"text": "x", "model": service.model_id, "extra": 1}, {"model": service.model_id},
                    {"text": "lone \ud800", "model": service.model_id},
                    {"text": f"see\n[image:{'ab' * 32}]", "model": service.model_id}):
            status, err = await alice.post(path, alice.body(**bad))
            assert status == 400, (bad, err)
        status, err = await alice.post(path, alice.body(text="x", model="no-such-model"))
        assert status == 404
        status, err = await alice.post(path, alice.body(text="x", model=service.model_id, pages=10 ** 6))
        assert status == 409 and err["error"]["type"] == "page_limit"

        status, long = await alice.post(path, alice.body(text="Write a very long story about the sea.",
                                                         model=service.model_id, max_output_tokens=400, temperature=0))
        assert status == 202
        target = long["sequence"]
        status, cancel = await alice.post(f"/conversations/{con}/cancellations",
                                          alice.body(target_sequence=target))
        assert status == 201 and cancel["kind"] == "conversation.cancel", cancel
        done = await _wait(alice, long["operation"])
        assert done["execution"] == "cancelled" and done["result"]["finish"] == "cancelled"
        assert done["result"]["output_tokens"] < 400
        # cancelling it again, or a sequence that is no input: refused
        status, err = await alice.post(f"/conversations/{con}/cancellations", alice.body(target_sequence=target))
        assert status == 409
        status, err = await alice.post(f"/conversations/{con}/cancellations", alice.body(target_sequence="1"))
        assert status == 404


async def test_restart_interrupts_an_unfinished_admission(nats_url, service):
    spec = fresh_spec()
    async with shared_app(nats_url, spec, service=service) as (runtime, p, client):
        alice = p["alice"]
        _, con = await _setup(p)
        status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
            text="Count from one to one hundred.", model=service.model_id, max_output_tokens=400, temperature=0))
        assert status == 202
        op = receipt["operation"]
        running = await _wait(alice, op, states=("running",) + TERMINAL)
        assert running["execution"] == "running"
    # the runtime stopped mid-generation: no completion was journalled
    async with shared_app(nats_url, spec) as (runtime, p, client):  # no model service this time
        alice = p["alice"]
        await alice.sync()
        status, after = await alice.get(f"/operations/{op}")
        assert status == 200 and after["execution"] == "interrupted" and after["status"]["terminal"] == "saved"
        assert after["result"]["finish"] == "interrupted"
        kinds = [t.kind for t in await _transfers(runtime)]
        assert kinds.count(TransferKind.LEASE) == 1 and kinds.count(TransferKind.COMPLETION) == 1
        status, res = await alice.get(f"/operations/{op}/result")
        assert status == 200 and res["execution"] == "interrupted"
        status, stream = await alice.get(f"/operations/{op}/events")
        assert _sse_events(stream)[-1]["data"]["execution"] == "interrupted"
        # a runtime without a model service refuses inputs, clearly
        status, err = await alice.post(f"/conversations/{con}/inputs",
                                       alice.body(key="f" * 32, text="hi", model="smollm2-135m-instruct"))
        assert status == 409 and "no model service" in err["error"]["message"]
    async with shared_app(nats_url, spec, service=service) as (runtime, p, client):
        alice = p["alice"]
        await alice.sync()
        # a later input runs to its end; the queue is first come, first leased, so an input the boot
        # re-ran would have been leased before it
        status, later = await alice.post(f"/conversations/{con}/inputs", alice.body(
            key="e" * 32, text="Say no.", model=service.model_id, max_output_tokens=2))
        assert status == 202, later
        assert (await _wait(alice, later["operation"]))["execution"] == "completed"
        kinds = [t.kind for t in await _transfers(runtime)]
        assert kinds.count(TransferKind.LEASE) == 2  # the later input's only: the interrupted one never re-ran
        assert (await alice.get(f"/operations/{op}"))[1]["execution"] == "interrupted"


async def test_removing_a_member_ends_their_open_stream(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob = p["alice"], p["bob"]
        space, con = await _setup(p)
        status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
            text="Write a very long story about the sea.", model=service.model_id, max_output_tokens=300, temperature=0))
        assert status == 202
        op = receipt["operation"]
        await _wait(alice, op, states=("running",) + TERMINAL)
        bob_id = (await bob.sync())["participant"]
        async with _stream(bob, f"/operations/{op}/events") as stream:
            assert await stream.started("bob's stream to open") == 200   # it is open: now bob is removed
            status, _ = await alice.post(f"/spaces/{space}/members", alice.body(participant=bob_id, permissions=[]))
            assert status == 201
            events = _sse_events(await stream.finish())
        assert events[-1]["event"] == "error" and events[-1]["data"]["error"]["type"] == "not_found"
        assert all(e["event"] != "end" for e in events)
        assert (await bob.get(f"/operations/{op}/result"))[0] == 404
        status, cancel = await alice.post(f"/conversations/{con}/cancellations",
                                          alice.body(target_sequence=receipt["sequence"]))
        assert status in (201, 409)
        assert (await _wait(alice, op))["execution"] in ("cancelled", "completed")


async def test_conversation_events_list_gap_and_stream(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob, carol = p["alice"], p["bob"], p["carol"]
        space, con = await _setup(p)
        path = f"/conversations/{con}/inputs"
        ops = []
        for i in range(3):
            status, r = await alice.post(path, alice.body(text=f"Say {i}.", model=service.model_id,
                                                          max_output_tokens=2))
            assert status == 202
            ops.append(r)
        for r in ops:
            await _wait(alice, r["operation"])
        status, listed = await bob.get(f"/conversations/{con}/events?limit=2")
        assert status == 200 and [e["cursor"] for e in listed["events"]] == ["1", "2"]
        assert listed["events"][0]["text"] == "Say 0." and listed["events"][0]["sequence"] is None
        assert listed["events"][0]["operation"] == ops[0]["operation"] and listed["next_cursor"] == "2"
        assert listed["floor"] == "1" and listed["gap"] is None and listed["latest"] == "3"
        status, rest = await alice.get(f"/conversations/{con}/events?cursor=2")
        assert [e["cursor"] for e in rest["events"]] == ["3"] and rest["next_cursor"] is None
        assert rest["events"][0]["sequence"] == ops[2]["sequence"] and rest["events"][0]["execution"] == "completed"
        assert (await carol.get(f"/conversations/{con}/events"))[0] == 404
        assert (await alice.get(f"/conversations/{con}/events?stream=maybe"))[0] == 400

        # retiring alice's first input leaves a gap below the new floor
        floor = int(ops[1]["sequence"])
        status, _ = await alice.post("/participant/retirements", alice.body(retry_floor=str(floor)))
        assert status == 201
        status, after = await bob.get(f"/conversations/{con}/events")
        assert after["floor"] == "2" and after["gap"] == {"from": "1", "to": "1"}
        assert [e["cursor"] for e in after["events"]] == ["2", "3"]

        # stream: resume after cursor 2 by Last-Event-ID, see a new input live, end when bob is removed
        last_id = f"/aotx/v1/shared/conversations/{con}/events@2"
        bob_id = (await bob.sync())["participant"]
        async with _stream(bob, f"/conversations/{con}/events?stream=true", {"Last-Event-ID": last_id}) as stream:
            assert await stream.started("bob's stream to open") == 200
            await wait_until_async(lambda: "/events@3\n" in stream.text, "input 3 on bob's stream")
            status, r = await alice.post(path, alice.body(text="One more.", model=service.model_id,
                                                          max_output_tokens=2))
            assert status == 202
            await wait_until_async(lambda: "/events@4\n" in stream.text, "the new input 4 on bob's stream")
            assert (await alice.post(f"/spaces/{space}/members",
                                     alice.body(participant=bob_id, permissions=[])))[0] == 201
            events = _sse_events(await stream.finish())
        await _wait(alice, r["operation"])
        inputs = [e for e in events if e["event"] == "input"]
        assert [e["data"]["cursor"] for e in inputs] == ["3", "4"] and inputs[-1]["data"]["text"] == "One more."
        assert inputs[0]["id"] == f"/aotx/v1/shared/conversations/{con}/events@3"
        assert events[-1]["event"] == "error"


async def test_an_input_past_its_execution_deadline_ends_with_504(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service, execution_deadline=0.5) as (runtime, p, client):
        alice = p["alice"]
        _, con = await _setup(p)
        status, caps = await alice.get("/capabilities")
        assert caps["journal"] is not None
        status, r = await alice.post(f"/conversations/{con}/inputs", alice.body(
            text="Write a very long story about the sea.", model=service.model_id, max_output_tokens=400, temperature=0))
        assert status == 202
        done = await _wait(alice, r["operation"], states=TERMINAL + ("deadline_exceeded",))
        assert done["execution"] == "deadline_exceeded" and done["status_code"] == 504, done["result"]
        assert done["result"]["finish"] == "deadline" and done["result"]["output_tokens"] < 400
        assert done["status"]["terminal"] == "saved"
        status, res = await alice.get(f"/operations/{r['operation']}/result")
        assert status == 200 and res["execution"] == "deadline_exceeded" and res["finish"] == "deadline"
        status, stream = await alice.get(f"/operations/{r['operation']}/events")
        assert _sse_events(stream)[-1]["data"]["execution"] == "deadline_exceeded"


class _LosingRecorder:
    """A real recorder whose next append lands but answers as if its ack were lost."""

    def __init__(self, inner) -> None:
        self.inner, self.lose_next = inner, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def append(self, subject, data, **kw):
        ack = await self.inner.append(subject, data, **kw)
        if self.lose_next:
            self.lose_next = False
            from eventlog import JournalUnavailable
            raise JournalUnavailable(f"ack of message {ack.seq} lost (test)")
        return ack

    async def append_batch(self, messages):
        acks = await self.inner.append_batch(messages)
        if self.lose_next:
            self.lose_next = False
            from eventlog import JournalUnavailable
            raise JournalUnavailable(f"ack of the batch ending at {acks[-1].seq} lost (test)")
        return acks


async def test_an_admission_found_by_read_back_still_executes_once(nats_url, service):
    from eventlog import JetStreamRecorder
    spec = fresh_spec()
    recorder = _LosingRecorder(await JetStreamRecorder.connect(nats_url, spec))
    try:
        async with shared_app(nats_url, spec, recorder=recorder, service=service) as (runtime, p, client):
            alice = p["alice"]
            _, con = await _setup(p)
            body = alice.body(text="Say yes.", model=service.model_id, max_output_tokens=3)
            recorder.lose_next = True
            status, err = await alice.post(f"/conversations/{con}/inputs", body)
            assert status == 429, err                     # outcome unknown to the client: retry the same input
            status, receipt = await alice.post(f"/conversations/{con}/inputs", body)
            assert status == 200, receipt                 # it had landed: read back, the existing receipt
            done = await _wait(alice, receipt["operation"])
            assert done["execution"] == "completed", done["result"]
            kinds = [t.kind for t in await _transfers(runtime)]
            assert kinds.count(TransferKind.ADMISSION) == 1 and kinds.count(TransferKind.LEASE) == 1
    finally:
        await recorder.inner.close()
