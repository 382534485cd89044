"""Group commit: commands queued while a write is in flight are decided in order against the pending
state, packed per lineage into ticks (≤ 16 records, one append each), applied in stream order, and
answered after their ack; a failed append refuses its lineage's commands with nothing applied."""

from __future__ import annotations

import asyncio
import json

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import JournalFull
from eventlog.memory import MemoryRecorder

M = MutationKind


class SlowRecorder(MemoryRecorder):
    """Appends take a while (like an fsync), so commands pile up behind the one in flight."""

    def __init__(self, delay: float = 0.01, **kw) -> None:
        super().__init__(**kw)
        self.delay, self.appends, self.batches, self.fail_subjects = delay, [], [], set()

    async def append(self, subject, payload, msg_id=None, expected_last_subject_seq=None):
        await asyncio.sleep(self.delay)
        self.appends.append(subject)
        if subject in self.fail_subjects:
            raise JournalFull("journal full: maximum bytes exceeded (test)")
        return await super().append(subject, payload, msg_id, expected_last_subject_seq)

    async def append_batch(self, messages):
        """One wait for the whole batch (one fsync); refused whole if it touches a failing subject."""
        await asyncio.sleep(self.delay)
        self.appends.extend(m.subject for m in messages)
        self.batches.append([m.subject for m in messages])
        if any(m.subject in self.fail_subjects for m in messages):
            raise JournalFull("journal full: maximum bytes exceeded (test)")
        return await super().append_batch(messages)


def body(who: str, seq: int, key: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(who).hex(),
                       "operation_key": f"{key:032x}", "sequence": str(seq), **fields}).encode()


def par(who: str) -> str:
    return f"par-{lineage_for(who).hex()}-{1:032x}"


def spc(who: str, ident: int) -> str:
    return f"spc-{lineage_for(who).hex()}-{ident:032x}"


async def started(rec) -> SharedRuntime:
    return await SharedRuntime(recorder=rec, progress=False).start()


async def test_batches_pack_a_lineage_and_fly_lineages_together_and_replay_equals_live():
    rec = SlowRecorder()
    rt = await started(rec)
    names = ["alice", "bob", "carol", "dave"]
    sub = lambda who, kind, raw, space=None: submit_body(rt, Actor(who, Grants.all()), kind, raw, space)  # noqa: E731
    out = await asyncio.gather(*(sub(n, M.REGISTER, body(n, 1, 1)) for n in names))
    assert [o.status for o in out] == [201] * 4
    # several commands of one lineage in flight at once, plus the other lineages, plus exact retries
    # and a stale sequence of a command still pending in the same batch
    calls = []
    for n in names:
        calls += [sub(n, M.CREATE_SPACE, body(n, 2, 2, id=f"{2:032x}", scope="instance")),
                  sub(n, M.CREATE_SPACE, body(n, 3, 3, id=f"{3:032x}")),
                  sub(n, M.CREATE_SPACE, body(n, 3, 3, id=f"{3:032x}")),          # exact retry, same batch
                  sub(n, M.CREATE_SPACE, body(n, 3, 9, id=f"{9:032x}"))]          # same sequence, other bytes
    before = len(rec.appends)
    out = await asyncio.gather(*calls)
    for i in range(4):
        first, second, retry, changed = out[4 * i:4 * i + 4]
        assert (first.status, second.status, retry.status, changed.status) == (201, 201, 200, 409)
        assert retry.body == second.body and second.body["sequence"] == "3"
    assert len(rec.appends) - before < 8       # packed: fewer appends than new operations
    # cross-lineage dependencies in one burst: alice's space gets bob as a member while bob writes in
    # alice's instance space and carol in bob's; every answer is what a serial run would give
    out = await asyncio.gather(
        sub("alice", M.SET_MEMBER, body("alice", 4, 4, participant=par("bob"), permissions=["read"]), spc("alice", 2)),
        sub("bob", M.CREATE_CONVERSATION, body("bob", 4, 4, id=f"{4:032x}"), spc("alice", 2)),
        sub("carol", M.CREATE_CONVERSATION, body("carol", 4, 4, id=f"{4:032x}"), spc("bob", 2)),
        sub("dave", M.RETIRE, body("dave", 4, 4, retry_floor="3")),
        sub("carol", M.CREATE_SPACE, body("carol", 5, 5)),
    )
    assert out[0].status == 201
    assert out[1].status == 403          # bob's explicit read-only row, applied before bob's command
    assert [o.status for o in out[2:]] == [201, 201, 201]
    fresh = await started(rec)
    assert fresh.state_hash() == rt.state_hash()
    assert fresh.projector.messages == rt.projector.messages
    await fresh.stop()
    await rt.stop()


async def test_a_failed_append_refuses_its_lineage_and_applies_nothing_of_it():
    rec = SlowRecorder()
    rt = await started(rec)
    sub = lambda who, kind, raw, space=None: submit_body(rt, Actor(who, Grants.all()), kind, raw, space)  # noqa: E731
    assert [o.status for o in await asyncio.gather(sub("alice", M.REGISTER, body("alice", 1, 1)),
                                                   sub("bob", M.REGISTER, body("bob", 1, 1)))] == [201, 201]
    rec.fail_subjects.add(rt.spec.subject(lineage_for("alice").hex(), "tick"))
    out = await asyncio.gather(sub("alice", M.CREATE_SPACE, body("alice", 2, 2)),
                               sub("alice", M.CREATE_SPACE, body("alice", 3, 3)),
                               sub("bob", M.CREATE_SPACE, body("bob", 2, 2)))
    assert [o.status for o in out] == [429, 429, 201]
    me = await rt.query("participant", Actor("alice", Grants.all()))
    assert me.body["next_sequence"] == "2"
    rec.fail_subjects.clear()
    assert await rt.probe()
    again = await sub("alice", M.CREATE_SPACE, body("alice", 2, 2))
    assert again.status == 201
    fresh = await started(rec)
    assert fresh.state_hash() == rt.state_hash()
    await fresh.stop()
    await rt.stop()


async def test_near_full_tables_decide_on_the_pending_state():
    from aotx.state import Capacities
    rec = SlowRecorder()
    rt = await SharedRuntime(recorder=rec, capacities=Capacities(receipts=6, spaces=5), progress=False).start()
    sub = lambda who, kind, raw, space=None: submit_body(rt, Actor(who, Grants.all()), kind, raw, space)  # noqa: E731
    names = ["alice", "bob", "carol", "dave"]
    assert [o.status for o in await asyncio.gather(*(sub(n, M.REGISTER, body(n, 1, 1)) for n in names))] == [201] * 4
    # two receipts left: the third command of another lineage is decided on the pending state
    out = await asyncio.gather(sub("alice", M.CREATE_SPACE, body("alice", 2, 2)),
                               sub("bob", M.CREATE_SPACE, body("bob", 2, 2)),
                               sub("carol", M.CREATE_SPACE, body("carol", 2, 2)),
                               sub("alice", M.CREATE_SPACE, body("alice", 3, 3)))
    assert [o.status for o in out] == [201, 201, 507, 507]
    assert "receipts" in out[2].body["error"]["message"]
    fresh = await SharedRuntime(recorder=rec, capacities=Capacities(receipts=6, spaces=5), progress=False).start()
    assert fresh.state_hash() == rt.state_hash()
    await fresh.stop()
    await rt.stop()
