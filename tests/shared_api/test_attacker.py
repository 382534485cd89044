"""An attacker's pass over the shared API (issue 9): what a removed or blocked member, a member with
partial rights, a principal whose grant a reload revoked, another principal or an unknown token can
still see, learn or change. The world (tests/shared_api/attacker_world.py) is deployed like
`aotx serve`; every probe runs against a real nats-server and the real model.

The rule checked on every route: a resource the caller may not read answers exactly what a resource
that does not exist answers (same status, same error, the ID aside), and a refused write changes
nothing. Where the answer is 403 it is one that says nothing about the resource (a missing grant).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass

import pytest
import pytest_asyncio

from aotx.chat_types import ChatMessage
from aotx.memory import SourceRecord
from aotx.memory.ids import memory_object_id
from aotx.state import lineage_for
from aotx.state.memory_rows import MemoryKind
from tests.waiting import open_stream, wait_until_async

from .attacker_world import QUESTION, SECRETS, World, build_app, new_space, populate
from .harness import BASE
from .test_inputs import _sse_events, _wait

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(nats_url, service, tmp_path_factory):
    w, app = build_app(nats_url, service, tmp_path_factory.mktemp("attacker"))
    async with app.test_app() as test_app:
        await populate(w, test_app.test_client())
        for name in ("nobody", "olga", "stranger"):
            w[name].lineage = lineage_for(name).hex()
        yield w


# ------------------------------------------------------------------------------------------ helpers
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fake(real: str) -> str:
    """An ID of the same kind and lineage as `real` that names nothing."""
    if len(real) == 32:
        return secrets.token_hex(16)
    return real[:-32] + secrets.token_hex(16)


def _blind(body, real: str, fake: str) -> str:
    """The body with both IDs written alike, and without its request's own id (every answer has one)."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k != "request_id"}
    return json.dumps(body, sort_keys=True).replace(real, "<id>").replace(fake, "<id>")


async def _same_as_missing(who, path: str, real: str, *, headers=None, body=None, fields=None):
    """GET (or POST `fields` as a mutation) on `path` with the real ID and with one naming nothing:
    the two answers must be the same. Answers (status, body) of the real one."""
    fake = _fake(real)
    out = []
    for rid in (real, fake):
        p = path.replace("{id}", rid)
        hdr = None if headers is None else {k: v.replace("{id}", rid) for k, v in headers.items()}
        if fields is None:
            out.append(await who.get(p, hdr))
        else:
            filled = json.loads(json.dumps(fields).replace("{id}", rid))
            out.append(await who.post(p, who.body(**filled)))
    (s1, b1), (s2, b2) = out
    assert (s1, _blind(b1, real, fake)) == (s2, _blind(b2, real, fake)), (who.name, path, b1, b2)
    return s1, b1


def _reads(place) -> list[tuple[str, str, dict | None]]:
    """(path with {id}, the ID, headers) for every read route of one of alice's places."""
    s, c, o = place.space, place.con, place.op
    out = [(p, s, None) for p in ("/spaces/{id}", "/spaces/{id}/members", "/spaces/{id}/members?cursor=1&limit=1",
                                  "/spaces/{id}/conversations", "/spaces/{id}/conversations?cursor=0&limit=1",
                                  "/spaces/{id}/memory", "/spaces/{id}/memory?cursor=2&limit=1")]
    out += [(p, c, None) for p in ("/conversations/{id}", "/conversations/{id}/events",
                                   "/conversations/{id}/events?cursor=1&limit=1",
                                   "/conversations/{id}/events?stream=true")]
    out.append(("/conversations/{id}/events?stream=true", c,
                {"Last-Event-ID": f"{BASE}/conversations/{{id}}/events@1"}))
    out += [(p, o, None) for p in ("/operations/{id}", "/operations/{id}/result",
                                   "/operations/{id}/result?offset=1&limit=1", "/operations/{id}/result?offset=99999",
                                   "/operations/{id}/events", "/operations/{id}/events?offset=1",
                                   "/operations/{id}/events?offset=99999")]
    out.append(("/operations/{id}/events", o, {"Last-Event-ID": f"{BASE}/operations/{{id}}/events@1"}))
    out += [(p, place.admin_op, None) for p in ("/operations/{id}", "/operations/{id}/result",
                                                "/operations/{id}/events")]
    for obj in place.objects.values():
        out += [("/memory/{id}", obj, None), ("/memory/{id}?offset=1", obj, None),
                ("/memory/{id}?offset=99999", obj, None)]   # never the 400 that would tell its length
    return out


def _writes(w: World, who, place) -> list[tuple[str, str, str, dict]]:
    """(grant needed, path with {id}, the ID, body fields) for every write route aimed at a place."""
    home = w.homes.get(who.name, (place.space, place.con))[0]
    text = place.objects["text"]
    me = w.pids.get(who.name, w.pids["alice"])
    return [
        ("manage", "/spaces/{id}/members", place.space, {"participant": me, "permissions": ["read", "write", "manage"]}),
        ("write", "/spaces/{id}/conversations", place.space, {}),
        ("write", "/conversations/{id}/inputs", place.con,
         {"text": QUESTION, "model": w.service.model_id, "max_output_tokens": 1}),
        ("write", "/conversations/{id}/cancellations", place.con, {"target_sequence": "1"}),
        ("manage", "/spaces/{id}/publications", place.space, {"object": text, "source_version": "1"}),
        ("manage", f"/spaces/{home}/publications", text, {"object": "{id}", "source_version": "1"}),
        ("manage", f"/spaces/{home}/publications", text, {"object": "{id}", "source_version": "2"}),
    ]


@dataclass(frozen=True)
class Attack:
    places: tuple[str, ...]     # alice's places he must learn nothing of
    read: int | None            # what every read of them answers (None: not probed, he may read them)
    write: int                  # what every write aimed at them answers
    grants: tuple[str, ...] = ("write", "manage")   # the write probes that apply


ATTACKS = {
    "bob": Attack(("room", "inst", "priv"), 404, 404),      # removed from R and I after his input ran
    "carol": Attack(("room", "inst", "priv"), 404, 404),    # zero-rights rows in I and R
    "erin": Attack(("room", "priv"), 404, 404),             # R: write without read
    "frank": Attack(("room", "priv"), 404, 404),            # R: manage without read
    "mallory": Attack(("room", "priv"), 404, 404),          # another principal entirely
    "nobody": Attack(("room", "inst", "priv"), 404, 409),   # never registered (409: register first)
    "gina": Attack(("room", "inst", "priv"), 403, 404),     # shared_read revoked by a reload
    "hank": Attack(("room",), None, 403, ("write",)),       # shared_write revoked
    "ivan": Attack(("room",), None, 403, ("manage",)),      # shared_manage revoked
    "olga": Attack(("room", "inst", "priv"), 403, 403),     # a key with no shared action
    "stranger": Attack(("room", "inst", "priv"), 401, 401),  # a token the gateway does not know
}


# ------------------------------------------------------------------------- every route, every attacker
@pytest.mark.parametrize("name", sorted(n for n, a in ATTACKS.items() if a.read is not None))
async def test_every_read_answers_as_if_nothing_were_there(world, name):
    """Every GET route (lists with cursor and limit, SSE with and without Last-Event-ID, results at
    offsets, memory detail) on what alice holds answers as for an ID naming nothing."""
    who, attack = world[name], ATTACKS[name]
    before = world.state_hash()
    for kind in attack.places:
        for path, rid, headers in _reads(world.places[kind]):
            status, body = await _same_as_missing(who, path, rid, headers=headers)
            assert status == attack.read, (name, path, body)
    if attack.read in (401, 403):   # a participant's existence, to one who may read nothing
        status, body = await _same_as_missing(who, "/participant?participant={id}", world.pids["alice"])
        assert status == attack.read, body
    assert world.state_hash() == before


@pytest.mark.parametrize("name", sorted(ATTACKS))
async def test_every_write_is_refused_as_if_nothing_were_there(world, name):
    """Every POST route aimed at what alice holds (membership, conversation, input, cancellation,
    publication into her space, publication of her memory, at the right and a wrong version) is
    refused as for an ID naming nothing, and changes nothing: state and sequence stay as they were."""
    who, attack = world[name], ATTACKS[name]
    before, sequence = world.state_hash(), who.next_sequence
    for kind in attack.places:
        for grant, path, rid, fields in _writes(world, who, world.places[kind]):
            if grant in attack.grants:
                status, body = await _same_as_missing(who, path, rid, fields=fields)
                assert status == attack.write, (name, path, body)
    assert world.state_hash() == before and who.next_sequence == sequence


@pytest.mark.parametrize("name", ["bob", "carol", "erin", "frank", "mallory", "nobody"])
async def test_lists_show_nothing_of_unreadable_spaces(world, name):
    who, attack = world[name], ATTACKS[name]
    hidden_spaces = {world.places[k].space for k in attack.places}
    hidden_objects = {o for k in attack.places for o in world.places[k].objects.values()}
    seen, cursor = set(), "0"
    while cursor is not None:           # every page of GET /spaces, one row at a time
        status, page = await who.get(f"/spaces?cursor={cursor}&limit=1")
        assert status == 200, page
        seen |= {s["id"] for s in page["spaces"]}
        cursor = page["next_cursor"]
    assert not seen & hidden_spaces
    if name in world.homes:
        home = world.homes[name][0]
        status, body = await who.get(f"/spaces/{home}/memory?limit=1000")
        assert status == 200 and not {r["object"] for r in body["memory"]} & hidden_objects, body
        status, body = await who.get(f"/spaces/{home}/conversations")
        assert status == 200 and [c["id"] for c in body["conversations"]] == [world.homes[name][1]]


async def test_removed_member_keeps_his_receipt_and_nothing_else(world):
    """bob remembers his own input in R, alice's input there and its memory objects (derivable from
    her operation ID): his receipt stays readable; its result and events are 403 (the receipt already
    told him they exist); everything of alice's is the 404 of a name that does not exist."""
    bob, room = world["bob"], world.places["room"]
    op = world.ops["bob"]
    status, receipt = await bob.get(f"/operations/{op}")
    assert status == 200 and receipt["resource"] == room.con and receipt["execution"] == "completed"
    for path, headers in ((f"/operations/{op}/result", None), (f"/operations/{op}/result?offset=1", None),
                          (f"/operations/{op}/result?offset=99999", None),   # not the 416 that tells its length
                          (f"/operations/{op}/events", None),
                          (f"/operations/{op}/events", {"Last-Event-ID": f"{BASE}/operations/{op}/events@1"})):
        status, err = await bob.get(path, headers)
        assert status == 403 and err["error"]["type"] == "forbidden" and "bytes" not in err, (path, err)
    lineage, ident = bytes.fromhex(room.op[3:35]), bytes.fromhex(room.op[36:])
    for kind in ("text", "source", "embedding"):   # an attacker can compute alice's object IDs
        assert memory_object_id(lineage, ident, MemoryKind[kind.upper()]).hex() == room.objects[kind]
        # and those of his own input in R: R's memory now, hidden like the rest
        own = memory_object_id(bytes.fromhex(op[3:35]), bytes.fromhex(op[36:]), MemoryKind[kind.upper()]).hex()
        assert (await world["alice"].get(f"/memory/{own}"))[0] == 200
        assert (await _same_as_missing(bob, "/memory/{id}", own))[0] == 404


async def test_reader_member_reads_but_every_write_is_refused(world):
    """dave (read only in R) reads everything of R; each write there is 403 (he may know R exists)."""
    dave, room, w = world["dave"], world.places["room"], world
    before = w.state_hash()
    for path, rid, headers in _reads(room):
        if rid == room.admin_op:   # another member's operation that is not an input: never his to read
            assert (await _same_as_missing(dave, path, rid))[0] == 404
            continue
        if "stream=true" in path or path.startswith("/operations/{id}/events") or "offset=" in path:
            continue    # streams: see the streams test; an offset may pass a short output
        status, body = await dave.get(path.replace("{id}", rid),
                                      None if headers is None else {k: v.replace("{id}", rid)
                                                                   for k, v in headers.items()})
        assert status == 200, (path, body)
    for grant, path, rid, fields in _writes(w, dave, room)[:5]:   # aimed at R: members, conversations,
        status, body = await dave.post(path.replace("{id}", rid), dave.body(**fields))   # inputs, cancel, publish
        assert status == 403 and body["error"]["type"] == "forbidden", (path, body)
    assert w.state_hash() == before


async def test_recall_reads_as_the_author(world):
    """An input in one's own space recalls only what its author may read: removed (bob) or blocked
    (carol) from I, nothing of it; mallory, with implicit instance access, recalls it."""
    bare = len(world.service.chat_prompt([ChatMessage(role="user", content=QUESTION)]))
    tokens = {}
    for name, op in world.recall_ops.items():
        status, result = await world[name].get(f"/operations/{op}/result")
        assert status == 200, result
        tokens[name] = result["input_tokens"]
    assert tokens["bob"] == bare and tokens["carol"] == bare, tokens
    assert tokens["mallory"] > bare, tokens


async def test_a_published_copy_shows_its_provenance_and_nothing_behind_it(world):
    """mallory reads Q, where alice published R's secret: the copy and its copied source record are
    hers to read (publication copies them, by design), so she learns R's conversation and alice's
    operation ID; behind those IDs everything answers as if nothing were there."""
    mallory, room = world["mallory"], world.places["room"]
    status, body = await mallory.get(f"/spaces/{world.q}/memory")
    assert status == 200, body
    rows = {r["kind"]: r for r in body["memory"] if r["owner"] == world.q}
    assert set(rows) == {"text", "source", "embedding"} and not set(room.objects.values()) & {
        r["object"] for r in rows.values()}
    status, text = await mallory.get(f"/memory/{rows['text']['object']}")
    assert status == 200 and base64.b64decode(text["data"]).decode() == SECRETS["room"]
    status, source = await mallory.get(f"/memory/{rows['source']['object']}")
    record = SourceRecord.decode(base64.b64decode(source["data"]))
    assert record.conversation.hex() == room.con[4:36] + room.con[37:]
    assert record.operation.hex() == room.op[3:35] + room.op[36:]
    for path, rid in (("/conversations/{id}", room.con), ("/operations/{id}", room.op),
                      ("/memory/{id}", room.objects["text"]), ("/memory/{id}", room.objects["source"])):
        assert (await _same_as_missing(mallory, path, rid))[0] == 404


async def test_media_upload_and_reference_reveal_nothing_of_other_uploads(world):
    """sha256-addressed media: another uploader's bytes answer 201 to a new uploader (200 only to
    himself again), and an input referencing media he did not upload answers exactly what a sha256
    nobody uploaded answers."""
    alice, mallory, bob, hank = world["alice"], world["mallory"], world["bob"], world["hank"]
    blob = b"\x89PNG\r\n\x1a\n" + secrets.token_bytes(64)
    assert (await alice.post_blob(blob, "image/png"))[0] == 201
    status, got = await mallory.post_blob(blob, "image/png")
    assert status == 201 and got["sha256"] == _sha256(blob), got   # not "200: same bytes again"
    assert (await mallory.post_blob(blob, "image/png"))[0] == 200
    assert (await hank.post_blob(blob, "image/png"))[0] == 403             # shared_write revoked
    home = world.homes["bob"][1]
    sha = _sha256(blob)
    status, err = await _same_as_missing(bob, f"/conversations/{home}/inputs", sha, fields={
        "text": "look", "model": world.service.model_id, "max_output_tokens": 1,
        "media": [{"type": "image", "sha256": "{id}"}]})
    assert status == 409 and err["error"]["type"] == "media_not_owned", err
    own = b"\x89PNG\r\n\x1a\n" + secrets.token_bytes(64)
    assert (await bob.post_blob(own, "image/png"))[0] == 201
    status, err = await _same_as_missing(bob, "/conversations/{id}/inputs", world.places["room"].con, fields={
        "text": "look", "model": world.service.model_id, "max_output_tokens": 1,
        "media": [{"type": "image", "sha256": _sha256(own)}]})
    assert status == 404, err


async def test_unauthenticated_and_unknown_routes(world):
    client = world.client
    for path in ("/participant", "/spaces", f"/memory/{world.places['room'].objects['text']}", "/nothing"):
        for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Basic abc"}, world["stranger"].headers):
            resp = await client.get(BASE + path, headers=headers)
            assert resp.status_code == 401 and resp.headers["WWW-Authenticate"] == "Bearer", path


# ----------------------------------------------------------------------------------- open streams
async def test_open_streams_end_at_the_next_read_after_removal_block_or_reload(world):
    """Streams opened while allowed: a member removed (sam: alice's input events and the
    conversation's), a participant blocked in the instance space (tess), a reader whose shared_read a
    reload revoked (uma) and one whose token it removed (vic) each get one error event and the end."""
    w, alice = world, world["alice"]
    room, con = await new_space(alice, "room")
    for name in ("sam", "uma", "vic"):
        status, _ = await alice.post(f"/spaces/{room}/members",
                                     alice.body(participant=w.pids[name], permissions=["read"]))
        assert status == 201
    status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
        text="Write a very long story about the sea.", model=w.service.model_id, max_output_tokens=300, temperature=0))
    assert status == 202, receipt
    op = receipt["operation"]
    inst_con = w.places["inst"].con

    def stream(name: str, path: str):
        return open_stream(w.client, BASE + path, w[name].headers)

    async with stream("sam", f"/operations/{op}/events") as sam_op, \
            stream("sam", f"/conversations/{con}/events?stream=true") as sam_con, \
            stream("uma", f"/operations/{op}/events") as uma_op, \
            stream("vic", f"/operations/{op}/events") as vic_op, \
            stream("tess", f"/conversations/{inst_con}/events?stream=true") as tess_con:
        for s in (sam_op, sam_con, uma_op, vic_op, tess_con):
            assert await s.started() == 200
        await wait_until_async(lambda: all("event: output" in s.text for s in (sam_op, uma_op, vic_op)),
                               "the input to be streaming to every reader")
        await wait_until_async(lambda: "event: input" in tess_con.text and "event: input" in sam_con.text,
                               "the conversation streams to show their inputs")
        for space, name in ((room, "sam"), (w.places["inst"].space, "tess")):
            status, _ = await alice.post(f"/spaces/{space}/members",
                                         alice.body(participant=w.pids[name], permissions=[]))
            assert status == 201
        w.regrant(uma=("shared_write",), vic=None)
        ends = {label: _sse_events(await s.finish()) for label, s in (
            ("sam_op", sam_op), ("sam_con", sam_con), ("uma_op", uma_op), ("vic_op", vic_op),
            ("tess_con", tess_con))}
    want = {"sam_op": "not_found", "sam_con": "not_found", "uma_op": "forbidden", "vic_op": "unauthorized",
            "tess_con": "not_found"}
    for label, events in ends.items():
        assert events[-1]["event"] == "error" and events[-1]["data"]["error"]["type"] == want[label], (label, events[-1])
        assert all(e["event"] != "end" for e in events), label
    status, _ = await alice.post(f"/conversations/{con}/cancellations",
                                 alice.body(target_sequence=receipt["sequence"]))
    assert status == 201
    await _wait(alice, op)


async def test_instance_memory_follows_the_owner_spaces_membership(world):
    """wendy, registered, sees I's memory from her own space through implicit instance access; a
    write-only row hides it, a read row shows it again, a zero-rights row hides it: on the list and
    on the detail read, at each next read."""
    w, alice, wendy = world, world["alice"], world["wendy"]
    inst = w.places["inst"]
    home, _ = await new_space(wendy)
    text = inst.objects["text"]

    async def sees() -> bool:
        status, body = await wendy.get(f"/spaces/{home}/memory")
        assert status == 200, body
        listed = text in {r["object"] for r in body["memory"]}
        status, _ = await wendy.get(f"/memory/{text}")
        assert listed == (status == 200), (listed, status)
        if not listed:
            assert (await _same_as_missing(wendy, "/memory/{id}", text))[0] == 404
        return listed

    assert await sees()
    for permissions, visible in ((["write"], False), (["read"], True), (["manage"], False), ([], False),
                                 (["read", "write"], True)):
        status, _ = await alice.post(f"/spaces/{inst.space}/members",
                                     alice.body(participant=w.pids["wendy"], permissions=permissions))
        assert status == 201
        assert await sees() is visible, permissions
