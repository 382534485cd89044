"""A follower that fell behind applies the messages waiting in its consumer as runs (one hold of the
writer's lock, the projector's tables unlocked once: Projector.applying), and ends where a replay ends."""
from __future__ import annotations

import gc
import json

import pytest

from aotx.runtime import SharedRuntime, submit_body
from aotx.runtime.replay import Projector
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import MemoryRecorder, StreamSpec
from tests.waiting import wait_until_async

ALL = Grants.all()


def body(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


def tables(p: Projector) -> list:
    s = p.state
    return [s.participants, s.spaces, s.conversations, s.members, s.receipts]


def test_applying_unlocks_the_tables_once_and_restores_them_and_the_collector():
    p = Projector("S", "i")
    assert not any(t.flags.writeable for t in tables(p))
    was = gc.isenabled()
    with p.applying():
        assert all(t.flags.writeable for t in tables(p)) and not gc.isenabled()
        with p.applying():   # reentrant: the inner one leaves them as they are
            pass
        assert all(t.flags.writeable for t in tables(p)) and not gc.isenabled()
    assert not any(t.flags.writeable for t in tables(p)) and gc.isenabled() == was
    with pytest.raises(RuntimeError):
        with p.applying():
            raise RuntimeError("restored on the way out too")
    assert not any(t.flags.writeable for t in tables(p)) and gc.isenabled() == was


async def test_a_memory_subscription_hands_over_what_is_waiting():
    rec = MemoryRecorder("W")
    for i in range(5):
        await rec.append(f"w.j.{i % 2}.tick", b"%d" % i)
    sub = await rec.subscribe(2, "w.j.>")
    first = await sub.__anext__()
    assert first.seq == 2
    assert [m.seq for m in sub.take_waiting(2)] == [3, 4]
    assert [m.seq for m in sub.take_waiting(10)] == [5]
    assert sub.take_waiting(10) == []
    await sub.close()
    assert sub.take_waiting(10) == []


async def test_a_follower_behind_applies_what_waits_in_runs_and_equals_a_replay(nats_url):
    spec = StreamSpec(name="FOLLOWRUNS", subject_prefix="followruns.j")
    a = await SharedRuntime(nats_url, spec, progress=False, follow=True).start()
    b = await SharedRuntime(nats_url, spec, progress=False, follow=True).start()
    try:
        alice = Actor("alice", ALL)
        n = 40
        async with a.writer.lock:   # a falls behind: b's messages wait in a's consumer
            assert (await submit_body(b, alice, MutationKind.REGISTER, body("alice", 1))).status == 201
            for seq in range(2, n + 1):
                out = await submit_body(b, alice, MutationKind.CREATE_SPACE, body("alice", seq, scope="room"))
                assert out.status == 201, out.body
            end = b.writer.applied_seq()
            assert a.follower.applied == 0   # (the follower waits for the lock; a's consumer receives meanwhile)
        await wait_until_async(lambda: a.writer.applied_seq() >= end, "a catches up", timeout=30)
        assert a.state_hash() == b.state_hash()
        assert a.follower.applied == end and a.follower.runs < end   # several messages a run
        await fresh_replay_equals(nats_url, spec, a)
    finally:
        await a.stop()
        await b.stop()


async def fresh_replay_equals(nats_url: str, spec, rt: SharedRuntime) -> None:
    """A runtime booted now from the log (a fresh replay) has ``rt``'s state."""
    fresh = await SharedRuntime(nats_url, spec, progress=False).start()
    try:
        assert fresh.state_hash() == rt.state_hash()
    finally:
        await fresh.stop()
