"""Read rights on every memory and result path: a real nats-server, the real model and embedder.

* Instance memory is readable from another space only by a reader who may read its owner space
  now (current grants ∩ membership): a zero-rights row blocks it in lists, detail reads, recall
  into an input's prompt and as a publication source; a removed member loses it the same way.
* An author keeps his receipt, but his input's result bytes and live events need current read
  rights in the conversation's space: a removed author gets 403 and his open stream ends.
* Principals swapped on a running app (the SIGHUP reload) reach open streams at their next read.
"""

from __future__ import annotations

import asyncio
import base64

from api.shared import replace_principals
from aotx.chat_types import ChatMessage
from aotx.runtime import memory_work as mw
from aotx.runtime.executor import default_embedder
from aotx.state import Grants

from .harness import BASE, PRINCIPALS, fresh_spec, shared_app
from .test_inputs import _sse_events, _wait
from .test_memory import _memory, _register, _say, _space

SECRET = "The vault password is ZEBRA-4491."
ALL = {"shared_read", "shared_write", "shared_manage"}


def _bare_prompt(service, text: str) -> int:
    return len(service.chat_prompt([ChatMessage(role="user", content=text)]))


async def _set(owner, space: str, who, permissions: list[str]) -> None:
    pid = (await who.sync())["participant"]
    status, body = await owner.post(f"/spaces/{space}/members", owner.body(participant=pid, permissions=permissions))
    assert status == 201, body


def _raw(space: str) -> bytes:
    return bytes.fromhex(space[4:36]) + bytes.fromhex(space[37:])


async def test_zero_rights_row_blocks_instance_memory_on_every_path(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob, carol = p["alice"], p["bob"], p["carol"]
        await _register(alice, bob, carol)
        model = service.model_id
        inst, con = await _space(alice, "instance")
        await _set(alice, inst, bob, [])              # "a zero-rights row also blocks implicit instance access"
        await _say(alice, con, SECRET, model)
        secret_rows = {r["object"] for r in await _memory(alice, inst)}
        text_obj = next(r["object"] for r in await _memory(alice, inst) if r["kind"] == "text")
        assert (await bob.get(f"/spaces/{inst}"))[0] == 404

        bob_space, bob_con = await _space(bob)
        # list: bob's own private space shows none of alice's instance rows
        assert not secret_rows & {r["object"] for r in await _memory(bob, bob_space)}
        # detail: 404, as for any object he may not see
        assert (await bob.get(f"/memory/{text_obj}"))[0] == 404
        # publication source: 404, nothing changes
        status, err = await bob.post(f"/spaces/{bob_space}/publications",
                                     bob.body(object=text_obj, source_version="1"))
        assert status == 404, err
        # recall: bob's input in his own space recalls nothing of it (its prompt is the bare user turn)
        question = "What is the vault password?"
        done = await _say(bob, bob_con, question, model)
        assert done["result"]["input_tokens"] == _bare_prompt(service, question)
        # the reader's view: no zero-rights row for bob, no foreign memory in the rendered recall
        vector = default_embedder().embed([question])[0]
        rendered = mw.recall_for(runtime.state, runtime.memory, _raw(bob_space), bytes.fromhex(bob.lineage),
                                 Grants.all(), vector, 3)
        assert "vault password?" in rendered.context and SECRET not in rendered.context   # his own memory only

        # carol has implicit instance access: she sees it from her own space and recalls it
        carol_space, carol_con = await _space(carol)
        assert secret_rows <= {r["object"] for r in await _memory(carol, carol_space)}
        done = await _say(carol, carol_con, question, model)
        assert done["result"]["input_tokens"] > _bare_prompt(service, question)
        # once carol is blocked too (a removed member), every path closes for her at once
        await _set(alice, inst, carol, [])
        assert not secret_rows & {r["object"] for r in await _memory(carol, carol_space)}
        assert (await carol.get(f"/memory/{text_obj}"))[0] == 404
        assert SECRET in mw.recall_for(runtime.state, runtime.memory, _raw(inst), bytes.fromhex(alice.lineage),
                                       Grants.all(), vector, 3).context
        rendered = mw.recall_for(runtime.state, runtime.memory, _raw(carol_space), bytes.fromhex(carol.lineage),
                                 Grants.all(), vector, 3)
        assert "vault password?" in rendered.context and SECRET not in rendered.context
        # without the shared_read grant an author recalls nothing, even of his own space
        assert mw.recall_for(runtime.state, runtime.memory, _raw(inst), bytes.fromhex(alice.lineage),
                             Grants(shared_write=True), vector, 3).context == ""


async def test_an_author_removed_before_recall_recalls_nothing_of_the_room(nats_url, service):
    """The reader of recall is the input's author at recall time: removed between admission and recall,
    he recalls nothing of the room (its memory would flow into an output made for him)."""
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob = p["alice"], p["bob"]
        await _register(alice, bob)
        room, con = await _space(alice, "room")
        await _set(alice, room, bob, ["read", "write"])
        await _say(alice, con, SECRET, service.model_id)
        vector = default_embedder().embed(["What is the vault password?"])[0]
        assert SECRET in mw.recall_for(runtime.state, runtime.memory, _raw(room), bytes.fromhex(bob.lineage),
                                       Grants.all(), vector, 3).context
        await _set(alice, room, bob, [])
        assert mw.recall_for(runtime.state, runtime.memory, _raw(room), bytes.fromhex(bob.lineage),
                             Grants.all(), vector, 3).context == ""


async def _open_stream(client, who, path: str, timeout: float = 30.0):
    """An SSE request whose response has started (its status and headers are sent)."""
    conn = client.request(BASE + path, method="GET", headers=who.headers)
    await conn.__aenter__()
    await conn.send_complete()

    async def started():
        while conn.status_code is None:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(started(), timeout)
    assert conn.status_code == 200 and conn.headers["Content-Type"].startswith("text/event-stream")
    return conn


async def _read_until(conn, predicate, timeout: float = 120.0) -> str:
    """Chunks of an open SSE response until `predicate(text so far)` or the response ends."""
    text = ""

    async def go():
        nonlocal text
        while not predicate(text):
            chunk = await conn.receive()
            if not chunk:
                return
            text += chunk.decode("utf-8")

    await asyncio.wait_for(go(), timeout)
    return text


async def test_a_removed_author_keeps_his_receipt_but_not_his_result(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob = p["alice"], p["bob"]
        await _register(alice, bob)
        room, con = await _space(alice, "room")
        await _set(alice, room, bob, ["read", "write"])
        status, receipt = await bob.post(f"/conversations/{con}/inputs", bob.body(
            text="Write a very long story about the sea.", model=service.model_id, max_output_tokens=300, temperature=0))
        assert status == 202, receipt
        op = receipt["operation"]
        conn = await _open_stream(client, bob, f"/operations/{op}/events")
        events_conn = await _open_stream(client, bob, f"/conversations/{con}/events?stream=true")
        try:
            seen = await _read_until(conn, lambda t: "event: output" in t)
            assert conn.status_code == 200 and "event: end" not in seen
            await _read_until(events_conn, lambda t: "event: input" in t)
            await _set(alice, room, bob, [])                    # removed mid-generation
            rest = await _read_until(conn, lambda t: False)     # the stream must end by itself
            rest_events = await _read_until(events_conn, lambda t: False)
        finally:
            await conn.disconnect()
            await events_conn.disconnect()
        events = _sse_events(seen + rest)
        assert events[-1]["event"] == "error" and events[-1]["data"]["error"]["type"] == "forbidden", events[-1]
        assert all(e["event"] != "end" for e in events)
        assert _sse_events(rest_events)[-1]["event"] == "error"
        # the receipt stays his; the result bytes and new streams need read rights in the room: 403
        status, mine = await bob.get(f"/operations/{op}")
        assert status == 200 and mine["operation"] == op
        status, err = await bob.get(f"/operations/{op}/result")
        assert status == 403 and err["error"]["type"] == "forbidden", err
        status, err = await bob.get(f"/operations/{op}/events")
        assert status == 403, err
        assert (await bob.get(f"/conversations/{con}/events"))[0] == 404
        # alice (and any reader of the room) still reads it
        assert (await alice.get(f"/operations/{op}/result"))[0] == 200
        # his write row back, he cancels it: the rest of its 300 tokens (~10 s of CPU on the numpy model) would
        # check nothing more (201 while it runs; 409 only when it had already ended by itself)
        await _set(alice, room, bob, ["read", "write"])
        status, cancel = await bob.post(f"/conversations/{con}/cancellations",
                                        bob.body(target_sequence=receipt["sequence"]))
        done = await _wait(alice, op)
        assert (status, done["execution"]) in ((201, "cancelled"), (409, "completed")), (status, cancel, done)
        # with read alone, he reads it again (every new read rechecks: 403 above, 200 now)
        await _set(alice, room, bob, ["read"])
        status, got = await bob.get(f"/operations/{op}/result")
        assert status == 200 and got["execution"] == done["execution"]
        assert base64.b64decode(got["bytes"]) == base64.b64decode(
            (await alice.get(f"/operations/{op}/result"))[1]["bytes"])


async def test_replaced_principals_take_effect_on_open_streams(nats_url):
    """The gateway's principals swapped on a running app (SIGHUP's reload): a grant removed refuses
    the next read of an open stream, a token removed ends it too, a token added is accepted."""
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, client):
        alice, bob, carol = p["alice"], p["bob"], p["carol"]
        await _register(alice, bob, carol)
        room, con = await _space(alice, "room")
        await _set(alice, room, bob, ["read"])
        await _set(alice, room, carol, ["read"])
        bob_stream = await _open_stream(client, bob, f"/conversations/{con}/events?stream=true")
        carol_stream = await _open_stream(client, carol, f"/conversations/{con}/events?stream=true")
        app = client.app
        digest = {name: d for d, (name, _) in PRINCIPALS.items()}
        try:
            changed = {d: v for d, v in PRINCIPALS.items() if v[0] != "carol"}     # carol's token removed
            changed[digest["bob"]] = ("bob", {"shared_write"})                       # bob's read grant removed
            replace_principals(app, changed)
            bob_end = _sse_events(await _read_until(bob_stream, lambda t: False))
            carol_end = _sse_events(await _read_until(carol_stream, lambda t: False))
        finally:
            await bob_stream.disconnect()
            await carol_stream.disconnect()
        assert bob_end[-1]["event"] == "error" and bob_end[-1]["data"]["error"]["type"] == "forbidden"
        assert carol_end[-1]["event"] == "error" and carol_end[-1]["data"]["error"]["type"] == "unauthorized"
        assert (await bob.get(f"/spaces/{room}"))[0] == 403
        assert (await carol.client.get(BASE + "/participant", headers=carol.headers)).status_code == 401
        assert (await alice.get(f"/spaces/{room}"))[0] == 200
        replace_principals(app, {**changed, digest["carol"]: ("carol", ALL)})
        assert (await carol.get(f"/spaces/{room}"))[0] == 200
