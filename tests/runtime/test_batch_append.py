"""One fsync per round: the ticks of every lineage of a round commit as one atomic batch, each
lineage keeping its own guard; a batch refused whole is sent again flight by flight, so a refusal
lands on the lineage it belongs to; a lost batch ack is decided by reading the log back."""

from __future__ import annotations

import asyncio
import json

import pytest

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import DuplicateInBatch, JournalUnavailable, MessageTooLarge
from eventlog.memory import MemoryRecorder

M = MutationKind


class CountingRecorder(MemoryRecorder):
    """Counts batches and single appends; fails batches touching chosen subjects in chosen ways."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.batches: list[list[str]] = []
        self.singles: list[str] = []
        self.too_large: set[str] = set()
        self.lose_next: str | None = None   # "landed" / "lost": the next batch's ack is lost
        self.duplicate_next = False

    async def append(self, subject, payload, msg_id=None, expected_last_subject_seq=None):
        self.singles.append(subject)
        return await super().append(subject, payload, msg_id, expected_last_subject_seq)

    async def append_batch(self, messages):
        await asyncio.sleep(0.005)   # an fsync: commands queue up behind it
        self.batches.append([m.subject for m in messages])
        if any(m.subject in self.too_large for m in messages):
            raise MessageTooLarge("message size exceeds maximum allowed (test)")
        if self.duplicate_next:
            self.duplicate_next = False
            raise DuplicateInBatch("atomic publish batch contains duplicate message id (test)")
        lose, self.lose_next = self.lose_next, None
        if lose == "lost":
            raise JournalUnavailable("publish timed out waiting for the ack (test)")
        acks = await super().append_batch(messages)
        if lose == "landed":
            raise JournalUnavailable(f"ack of batch ending at {acks[-1].seq} lost (test)")
        return acks


def body(who: str, seq: int, key: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(who).hex(),
                       "operation_key": f"{key:032x}", "sequence": str(seq), **fields}).encode()


NAMES = ["alice", "bob", "carol", "dave"]


async def started(rec, names=NAMES, batch_min_messages=1) -> tuple[SharedRuntime, callable]:
    rt = await SharedRuntime(recorder=rec, progress=False, batch_min_messages=batch_min_messages).start()

    def sub(who, kind, raw, space=None):
        return submit_body(rt, Actor(who, Grants.all()), kind, raw, space)
    out = await asyncio.gather(*(sub(n, M.REGISTER, body(n, 1, 1)) for n in names))
    assert [o.status for o in out] == [201] * len(names)
    return rt, sub


async def replays_equal(rec, rt) -> None:
    fresh = await SharedRuntime(recorder=rec, progress=False).start()
    assert fresh.state_hash() == rt.state_hash() and fresh.projector.messages == rt.projector.messages
    await fresh.stop()


async def test_every_lineage_of_a_round_commits_as_one_batch():
    rec = CountingRecorder()
    rt, sub = await started(rec)
    assert rec.singles == []
    before = len(rec.batches)
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in NAMES))
    assert [o.status for o in out] == [201] * 4
    assert len(rec.batches) == before + 1          # one append, one fsync for the four lineages
    assert sorted(set(rec.batches[-1])) == sorted(rt.spec.subject(lineage_for(n).hex(), "tick") for n in NAMES)
    assert rec.singles == []
    await replays_equal(rec, rt)
    await rt.stop()


async def test_a_round_smaller_than_the_threshold_appends_message_by_message():
    rec = CountingRecorder()
    rt, sub = await started(rec, batch_min_messages=5)
    singles, batches = len(rec.singles), len(rec.batches)
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in NAMES))   # 4 messages
    assert [o.status for o in out] == [201] * 4
    assert (len(rec.singles) - singles, len(rec.batches)) == (4, batches)
    await replays_equal(rec, rt)
    await rt.stop()


async def test_a_conflict_on_one_lineage_refuses_only_that_lineage():
    rec = CountingRecorder()
    rt, sub = await started(rec)
    other = await SharedRuntime(recorder=rec, progress=False).start()   # a second writer of the same log
    won = await submit_body(other, Actor("alice", Grants.all()), M.CREATE_SPACE, body("alice", 2, 7))
    assert won.status == 201
    await other.stop()
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in NAMES))
    assert out[0].status == 409 and out[0].body["error"]["type"] == "conflict"
    assert [o.status for o in out[1:]] == [201, 201, 201]
    assert rt.failed is None and not rt.hold.active
    # the 409 came after the read-back: alice's next sequence is what the other writer left
    me = await rt.query("participant", Actor("alice", Grants.all()))
    assert me.body["next_sequence"] == "3"
    again = await sub("alice", M.CREATE_SPACE, body("alice", 2, 7))
    assert again.status == 200 and again.body == won.body      # the other writer's receipt, read back
    assert (await sub("alice", M.CREATE_SPACE, body("alice", 3, 3))).status == 201
    await replays_equal(rec, rt)
    await rt.stop()


@pytest.mark.parametrize("lose", ["landed", "lost"])
async def test_a_lost_batch_ack_is_decided_by_read_back(lose):
    rec = CountingRecorder()
    rt, sub = await started(rec)
    bodies = {n: body(n, 2, 2) for n in NAMES}
    rec.lose_next = lose
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, bodies[n]) for n in NAMES))
    assert [o.status for o in out] == [429] * 4     # outcome unknown to every lineage of the batch
    assert rt.hold.active and rt.hold.unsynced
    again = await asyncio.gather(*(sub(n, M.CREATE_SPACE, bodies[n]) for n in NAMES))
    assert [o.status for o in again] == ([200] * 4 if lose == "landed" else [201] * 4)
    assert not rt.hold.active
    for n, o in zip(NAMES, again):
        assert o.body["sequence"] == "2"
    await replays_equal(rec, rt)
    await rt.stop()


async def test_a_round_over_the_batch_limit_goes_out_in_batches_in_order():
    rec = CountingRecorder(batch_limit=2)
    names = [f"p{i}" for i in range(7)]
    rt, sub = await started(rec, names)
    calls = [sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in names]
    calls += [sub("p0", M.CREATE_SPACE, body("p0", s, s)) for s in range(3, 12)]   # a flight of several ticks
    out = await asyncio.gather(*calls)
    assert [o.status for o in out] == [201] * len(calls)
    assert all(len(b) <= 2 for b in rec.batches) and rec.singles == []
    await replays_equal(rec, rt)
    await rt.stop()


async def test_a_stream_without_atomic_batches_appends_message_by_message():
    rec = CountingRecorder(atomic_batches=False)
    rt, sub = await started(rec)
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in NAMES))
    assert [o.status for o in out] == [201] * 4
    assert rec.batches == [] and len(rec.singles) >= 8
    await replays_equal(rec, rt)
    await rt.stop()


async def test_a_flight_too_large_is_413_and_the_others_land():
    rec = CountingRecorder()
    rt, sub = await started(rec)
    rec.too_large.add(rt.spec.subject(lineage_for("bob").hex(), "tick"))
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in NAMES))
    assert [o.status for o in out] == [201, 413, 201, 201]
    assert len(rec.batches[-1]) == 1      # refused whole, then each flight alone
    me = await rt.query("participant", Actor("bob", Grants.all()))
    assert me.body["next_sequence"] == "2"
    await replays_equal(rec, rt)
    await rt.stop()


async def test_a_batch_answered_as_already_stored_stops_the_runtime():
    rec = CountingRecorder()
    rt, sub = await started(rec)
    rec.duplicate_next = True
    out = await asyncio.gather(*(sub(n, M.CREATE_SPACE, body(n, 2, 2)) for n in NAMES))
    assert [o.status for o in out] == [503] * 4 and "already stored" in rt.failed
    await rt.stop()
