"""Publication: manage rights in the destination, current source_version, distinct copies, provenance, 409s."""

import pytest

from aotx.memory import (MemoryApplyError, MemoryPublished, MemoryStore, decide_publication, decode_memory_event,
                         encode_memory_event)
from aotx.state import MemoryKind, MutationKind as M, Refusal, Scope, lineage_for
from tests.state.helpers import Driver

from .helpers import op, retained, space_id, unit

PRIVATE, OTHER, ROOM = space_id("alice", 0x10), space_id("alice", 0x11), space_id("bob", 0x12)


@pytest.fixture
def world():
    d = Driver()
    for p in ("alice", "bob"):
        d.register(p)
    d.send("alice", M.CREATE_SPACE, 2, 0x10, scope="private")
    d.send("alice", M.CREATE_SPACE, 3, 0x11, scope="private")
    d.send("bob", M.CREATE_SPACE, 2, 0x12, scope="room")
    store = MemoryStore()
    store.apply(retained("alice", 4, PRIVATE, Scope.PRIVATE, "heron is the code name", unit((0, 1.0)),
                         interpretation="a code name"))
    text = store.list_rows(PRIVATE)[0][1]
    return d, store, text


def publish(d, store, who, dest, obj, version, seq=5):
    return decide_publication(store, d.state, d.actor(who), op(who, seq), dest, obj, version)


def test_copies_into_distinct_objects_with_provenance(world):
    d, store, text = world
    d.send("bob", M.SET_MEMBER, 3, 0x20, d.spc("bob", 0x12), participant=d.par("alice"), permissions=["read", "manage"])
    event = publish(d, store, "alice", d.spc("bob", 0x12), text.object, 1)
    assert isinstance(event, MemoryPublished)
    src, emb = store.get(text.source), store.embedding_of(text.object)
    assert (event.origin_text, event.origin_text_version, event.origin_source, event.origin_embedding) == \
        (text.object, 1, src.id, emb.id)
    assert (event.actor, event.destination, event.scope) == (lineage_for("alice"), ROOM, int(Scope.ROOM))
    store.apply(decode_memory_event(encode_memory_event(event)))
    rows = store.list_rows(ROOM)[0]
    assert [r.kind for r in rows] == [MemoryKind.SOURCE, MemoryKind.TEXT, MemoryKind.EMBEDDING]   # no interpretation
    new_ids = {r.object for r in rows}
    assert not new_ids & {text.object, src.id, emb.id} and len(new_ids) == 3
    assert all(r.owner == ROOM and r.room == ROOM and r.scope == Scope.ROOM for r in rows)
    assert rows[1].source == rows[0].object and rows[2].source == rows[1].object
    assert [store.get(r.object).payload for r in rows] == [src.payload, store.get(text.object).payload, emb.payload]
    # the originals keep their scope and stay private to their space
    assert store.get(text.object).row.scope == Scope.PRIVATE and not store.visible(text.object, ROOM)
    assert [r.text.id for r in store.recall(ROOM, unit((0, 1.0)), 5)] == [rows[1].object]
    assert store.recall(OTHER, unit((0, 1.0)), 5) == []
    again = publish(d, store, "alice", d.spc("bob", 0x12), text.object, 1, seq=5)
    assert isinstance(again, MemoryPublished)
    with pytest.raises(MemoryApplyError, match="already exists"):
        store.apply(again)                   # same operation → same IDs: a publication is never applied twice


def test_refusals(world):
    d, store, text = world
    room = d.spc("bob", 0x12)
    r = publish(d, store, "alice", room, text.object, 1)
    assert isinstance(r, Refusal) and r.status == 404                  # alice cannot read bob's room
    d.send("bob", M.SET_MEMBER, 3, 0x20, room, participant=d.par("alice"), permissions=["read", "write"])
    assert publish(d, store, "alice", room, text.object, 1).status == 403     # no manage rights
    d.send("bob", M.SET_MEMBER, 4, 0x21, room, participant=d.par("alice"), permissions=["read", "manage"])
    assert publish(d, store, "bob", room, text.object, 1).status == 404       # bob cannot read alice's private space
    assert publish(d, store, "alice", room, bytes(16), 1).status == 404
    stale = publish(d, store, "alice", room, text.object, 2)
    assert (stale.status, stale.type) == (409, "conflict")
    for kind in (MemoryKind.SOURCE, MemoryKind.EMBEDDING, MemoryKind.INTERPRETATION):
        obj = next(r.object for r in store.list_rows(PRIVATE)[0] if r.kind == kind)
        refusal = publish(d, store, "alice", room, obj, 1)
        assert (refusal.status, refusal.type) == (409, "unsupported_kind"), kind
        assert refusal.error()["error"]["message"].startswith(f"a {kind.name.lower()} memory cannot be published")
    same = publish(d, store, "alice", d.spc("alice", 0x10), text.object, 1)
    assert (same.status, same.type) == (409, "conflict")
    assert publish(d, store, "alice", "spc-nope", text.object, 1).status == 400
