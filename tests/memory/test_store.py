"""MemoryStore: transitive visibility, current versions, lists, reads, recall order, replay, mode 2."""

import numpy as np
import pytest

from aotx.memory import (MemoryApplyError, MemoryRevised, MemoryStore, decode_memory_event, embedding_bytes,
                         encode_memory_event, recorded_mode, retention_event)
from aotx.state import MemoryKind, Scope, lineage_for

from .helpers import op, retained, space_id, unit

P1, P2 = space_id("alice", 1), space_id("alice", 2)        # two private spaces of one owner
ROOM, INST = space_id("alice", 3), space_id("bob", 4)


@pytest.fixture
def store():
    s = MemoryStore()
    s.apply(retained("alice", 1, P1, Scope.PRIVATE, "the launch code name is heron", unit((0, 1.0))))
    s.apply(retained("alice", 2, P2, Scope.PRIVATE, "my dentist is on friday", unit((0, 1.0), (1, 0.2))))
    s.apply(retained("alice", 3, ROOM, Scope.ROOM, "room notes", unit((0, 1.0), (2, 1.0)), interpretation="notes"))
    s.apply(retained("bob", 4, INST, Scope.INSTANCE, "the cafeteria closes at 3", unit((0, 0.5), (3, 1.0))))
    return s


def texts(recalled):
    return [r.text.payload.decode() for r in recalled]


def reads(*spaces):
    """A reader who may read exactly these spaces now."""
    return lambda space: space in spaces


EVERYONE = reads(P1, P2, ROOM, INST, space_id("alice", 9))


def test_two_private_spaces_of_one_owner_never_share(store):
    q = unit((0, 1.0))
    assert texts(store.recall(P1, q, 10, EVERYONE)) == ["the launch code name is heron", "the cafeteria closes at 3"]
    assert texts(store.recall(P2, q, 10, EVERYONE)) == ["my dentist is on friday", "the cafeteria closes at 3"]
    assert texts(store.recall(space_id("alice", 9), q, 10, EVERYONE)) == ["the cafeteria closes at 3"]  # instance only


def test_instance_memory_reaches_only_readers_of_its_owner_space(store):
    """A zero-rights row in the instance space (the reader may not read it) hides its memory from
    every other space too: lists, detail reads and recall; without a reader only a space's own
    memory is visible (fail closed)."""
    q = unit((0, 1.0))
    blocked = reads(P1, P2, ROOM)                 # may read his own spaces, not INST
    inst_rows = {r.object for r in store.list_rows(INST, reader=EVERYONE)[0]}
    assert len(inst_rows) == 3
    for reader in (blocked, None):
        assert texts(store.recall(P1, q, 10, reader)) == ["the launch code name is heron"]
        assert not inst_rows & {r.object for r in store.list_rows(P1, reader=reader)[0]}
        assert not any(store.visible(o, P1, reader) for o in inst_rows)
        assert all(store.read(o, P1, reader=reader).status == 404 for o in inst_rows)
        assert not inst_rows & {r["object"] for r in store.list_json(P1, reader=reader)["memory"]}
    assert inst_rows <= {r.object for r in store.list_rows(P1, reader=EVERYONE)[0]}
    # a reader who may no longer read a space recalls none of its own memory there either
    assert texts(store.recall(P1, q, 10, reads(INST))) == ["the cafeteria closes at 3"]
    assert [r.owner for r in store.list_rows(P1, reader=reads(INST))[0]] == [INST] * 3
    # the page budget's bound counts what any reader could recall
    assert {t.payload for t, _ in store.visible_texts(P1)} == {b"the launch code name is heron",
                                                                 b"the cafeteria closes at 3"}


def test_can_recall_says_whether_any_vector_recalls_something(store):
    """What lets an input's prompt skip waiting for its embedding (aotx.runtime.memory_work.can_recall):
    False exactly where recall answers nothing for every query."""
    spaces = (P1, P2, ROOM, INST, space_id("alice", 9), space_id("carol", 5))
    queries = [unit((d, 1.0)) for d in range(4)] + [unit((0, -1.0))]
    for space in spaces:
        for reader in (EVERYONE, reads(P1, P2, ROOM), reads(INST), reads(), None):
            recalls = any(store.recall(space, q, 10, reader) for q in queries)
            assert store.can_recall(space, reader) is recalls, (space, reader)
    assert not MemoryStore().can_recall(P1, EVERYONE)
    assert not store.can_recall(space_id("carol", 5), reads())   # a reader of nothing: not even instance memory


def test_recall_order_is_by_score_then_creation_and_k_bounds_it(store):
    s = MemoryStore()
    for i, v in enumerate([unit((0, 1.0), (1, 1.0)), unit((0, 1.0)), unit((1, 1.0)), unit((0, 1.0))]):
        s.apply(retained("alice", i + 1, P1, Scope.PRIVATE, f"m{i}", v))
    r = s.recall(P1, unit((0, 1.0)), 3)
    assert texts(r) == ["m1", "m3", "m0"] and r[0].score == pytest.approx(1.0) and r[2].score == pytest.approx(0.7071, abs=1e-4)
    assert s.recall(P1, unit((0, 1.0)), 0) == [] and len(s.matrix) == 4
    assert r[0].source_record.actor == lineage_for("alice") and r[0].embedding.row.source == r[0].text.id


def test_rows_chain_and_list(store):
    everything, nxt = store.list_rows(ROOM, reader=EVERYONE)
    assert nxt is None
    rows = everything[:4]
    assert [(r.owner, r.scope) for r in everything[4:]] == [(INST, Scope.INSTANCE)] * 3   # instance memory is shared
    kinds = [(r.kind, r.scope, r.room == ROOM) for r in rows]
    assert kinds == [(MemoryKind.SOURCE, Scope.ROOM, True), (MemoryKind.TEXT, Scope.ROOM, True),
                     (MemoryKind.EMBEDDING, Scope.ROOM, True), (MemoryKind.INTERPRETATION, Scope.ROOM, True)]
    src, text, emb, interp = rows
    assert (text.source, emb.source, interp.source, src.source) == (src.object, text.object, text.object, bytes(16))
    assert (src.byte_length, text.byte_length, emb.byte_length) == (96, 10, 1536)
    page, nxt = store.list_rows(P1, 0, 2)
    assert len(page) == 2 and nxt == 2
    assert [r["kind"] for r in store.list_json(P1)["memory"]][:3] == ["source", "text", "embedding"]
    assert store.list_json(P1, cursor=2, limit=1)["memory"][0]["kind"] == "embedding"


def test_detail_read_offset_version_and_visibility(store):
    text = store.list_rows(P1)[0][1]
    got = store.read(text.object, P1, offset=4)
    assert got.data == b"launch code name is heron" and got.next_offset == 29
    assert got.json()["data"] == "bGF1bmNoIGNvZGUgbmFtZSBpcyBoZXJvbg==" and got.json()["row"]["kind"] == "text"
    assert store.read(text.object, P2).status == 404           # not visible from the owner's other private space
    assert store.read(text.object, P1, version=2).status == 409
    assert store.read(text.object, P1, offset=30).status == 400


def test_revision_makes_derived_old_versions_invisible(store):
    text = store.list_rows(ROOM)[0][1]
    emb = store.embedding_of(text.object)
    interp = store.interpretation_of(text.object)
    store.apply(MemoryRevised(op("alice", 9), lineage_for("alice"), text.object, 2, emb.id, 2,
                              b"room notes, revised", embedding_bytes(unit((2, 1.0)))))
    assert store.get(text.object).row.version == 2 and store.get(text.object).row.byte_length == 19
    assert store.visible(emb.id, ROOM) and not store.visible(interp.id, ROOM)
    [r] = store.recall(ROOM, unit((2, 1.0)), 1)
    assert r.text.payload == b"room notes, revised" and r.interpretation is None and r.score == pytest.approx(1.0)
    with pytest.raises(MemoryApplyError, match="does not follow"):
        store.apply(MemoryRevised(op("alice", 10), lineage_for("alice"), text.object, 2, emb.id, 3,
                                  b"x", embedding_bytes(unit((2, 1.0)))))


def test_no_memory_input_is_applied_twice_and_replay_is_identical(store):
    event = retained("alice", 1, P1, Scope.PRIVATE, "again", unit((0, 1.0)))
    assert store.has_retained(lineage_for("alice"), op("alice", 1).operation)
    before = store.digest()
    with pytest.raises(MemoryApplyError, match="already retained"):
        store.apply(event)
    assert store.digest() == before
    log = [retained("alice", 1, P1, Scope.PRIVATE, "the launch code name is heron", unit((0, 1.0)))]
    replay = MemoryStore()
    for e in log:
        replay.apply(decode_memory_event(encode_memory_event(e)))
    fresh = MemoryStore()
    fresh.apply(log[0])
    assert replay.digest() == fresh.digest() != before


def test_recorded_mode_and_recovery_uses_it():
    assert recorded_mode(2, True) == 2 and recorded_mode(2, False) == 1 and recorded_mode(1, True) == 1
    e = retained("alice", 5, P1, Scope.PRIVATE, "x", unit((0, 1.0)), interpretation="a greeting")
    assert e.mode == 2
    s = MemoryStore()
    s.apply(decode_memory_event(encode_memory_event(e)))   # apply takes no capability input: the record rules
    assert [r.kind for r in s.list_rows(P1)[0]] == [2, 1, 3, 4]
    bad = retention_event(op("alice", 6), e.conversation, P1, Scope.PRIVATE, lineage_for("alice"), 1, b"x",
                          unit((0, 1.0)))
    with pytest.raises(MemoryApplyError, match="mode 1 records no interpretation"):
        s.apply(type(bad)(**{**bad.__dict__, "interpretation": b"sneaky"}))
    with pytest.raises(MemoryApplyError, match="source record does not describe"):
        s.apply(type(bad)(**{**bad.__dict__, "actor": lineage_for("mallory")}))
    assert len(s) == 4 and np.array_equal(s.matrix[0], unit((0, 1.0)))
