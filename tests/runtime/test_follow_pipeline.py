"""Command rounds in follow mode (aotx.runtime.pipeline, aotx.runtime.command_round): two runtimes on
one journal; pipelined where asked (follow mode goes one round at a time by default, AOTX_COMMAND_PIPELINE
asks for more), a round of one is decided and sent while its previous round's append is in flight, and
still on the log as it is when the round begins (docs/SCALE.md §3: the other runtime's
acknowledged revocation is seen, its follower stopped); applying the log up to a point takes the other
writer's messages from what the follower heard and reads back only what it did not
(aotx.runtime.catch_up.apply_to); the states equal a fresh replay. In memory: the recorder holds a chosen subject's appends at a gate the test opens."""

from __future__ import annotations

import asyncio

from aotx.runtime import SharedRuntime, submit_body
from aotx.runtime.catch_up import apply_to
from aotx.state import Actor, Grants, MutationKind, lineage_for
from tests.runtime.test_group_commit import body, par, spc
from tests.runtime.test_pipeline import GatedRecorder
from tests.waiting import wait_until_async

M = MutationKind
ALL = Grants.all()


async def two(rec: GatedRecorder, depth: int = 1) -> tuple[SharedRuntime, SharedRuntime]:
    a = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    b = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    for rt in (a, b):   # follow mode goes one round at a time unless asked (AOTX_COMMAND_PIPELINE)
        rt.commands.follow_depth = depth
    return a, b


def sub(rt: SharedRuntime, who: str, kind, raw: bytes, space: str | None = None) -> asyncio.Task:
    return asyncio.ensure_future(submit_body(rt, Actor(who, ALL), kind, raw, space))


async def ok(rt: SharedRuntime, who: str, kind, raw: bytes, space: str | None = None) -> dict:
    out = await sub(rt, who, kind, raw, space)
    assert out.status in (200, 201), out.body
    return out.body


async def equal_replay(rec: GatedRecorder, *rts: SharedRuntime) -> None:
    end = rec._last_seq
    for rt in rts:
        async with rt.writer.lock:   # (a runtime whose follower is stopped reads the rest back)
            await rt.writer.read_back()
        assert rt.writer.applied_seq() == end
    fresh = await SharedRuntime(recorder=rec, progress=False).start()
    try:
        assert all(rt.state_hash() == fresh.state_hash() for rt in rts)
    finally:
        await fresh.stop()


async def test_a_round_behind_one_in_flight_is_sent_and_decided_on_the_log_as_it_is_when_it_begins():
    rec = GatedRecorder()
    a, b = await two(rec, depth=2)
    try:
        for who in ("alice", "bob"):
            await ok(a, who, M.REGISTER, body(who, 1, 1))
        await ok(b, "carol", M.REGISTER, body("carol", 1, 1))
        await ok(b, "carol", M.CREATE_SPACE, body("carol", 2, 2, id=f"{2:032x}", scope="room"))
        await ok(b, "carol", M.SET_MEMBER, body("carol", 3, 3, participant=par("bob"), permissions=["read", "write"]),
                 spc("carol", 2))
        await wait_until_async(lambda: a.writer.applied_seq() == rec._last_seq, "a follows b")
        await a.follower.stop()   # a hears nothing of b from here on: only a round's catch-up reads b's writes
        alice_subject = a.spec.subject(lineage_for("alice").hex(), "tick")
        gate = rec.gates[alice_subject] = asyncio.Event()
        first = sub(a, "alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
        await wait_until_async(lambda: rec.sent.count(alice_subject) >= 2, "alice's append sent")
        # acknowledged on b while alice's round is in flight on a: bob may only read carol's room now
        await ok(b, "carol", M.SET_MEMBER, body("carol", 4, 4, participant=par("bob"), permissions=["read"]),
                 spc("carol", 2))
        revoked_at = rec._last_seq
        # bob's command on a: a round behind alice's, sent while hers waits at the gate
        out = await asyncio.wait_for(sub(a, "bob", M.CREATE_CONVERSATION, body("bob", 2, 2), spc("carol", 2)), 10)
        assert out.status == 403 and "write right" in out.body["error"]["message"], out.body
        own = await asyncio.wait_for(sub(a, "bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private")), 10)
        assert own.status == 201, own.body
        assert not first.done()   # both answered while alice's append was still in flight
        assert a.writer.applied_seq() > revoked_at   # the revocation applied before bob's space, in stream order
        gate.set()
        assert (await first).status == 201
        await equal_replay(rec, a, b)
    finally:
        await a.stop()
        await b.stop()


async def test_applying_the_log_to_a_point_takes_what_the_follower_heard_and_reads_back_only_the_rest():
    rec = GatedRecorder()
    a, b = await two(rec)
    reads: list = []
    original = a.writer.read_back

    async def read_back(upto=None):
        reads.append(upto)
        return await original(upto)
    a.writer.read_back = read_back
    try:
        await ok(b, "carol", M.REGISTER, body("carol", 1, 1))
        async with a.writer.lock:   # a's applier waits: carol's messages stay heard, not applied
            for seq in range(2, 7):
                await ok(b, "carol", M.CREATE_SPACE, body("carol", seq, seq, scope="room"))
            end = rec._last_seq
            await wait_until_async(lambda: a.follower.heard and a.follower.heard[-1].seq == end, "a heard carol")
            assert a.writer.applied_seq() < end
            assert await apply_to(a.writer, end - 2) and a.writer.applied_seq() == end - 2   # (up to a point)
            assert await apply_to(a.writer, end) and a.writer.applied_seq() == end
            assert reads == []   # all of it from what the follower heard
        await a.follower.stop()
        await ok(b, "carol", M.CREATE_SPACE, body("carol", 7, 7, scope="room"))
        async with a.writer.lock:   # not following: read back
            assert await apply_to(a.writer, rec._last_seq) and a.writer.applied_seq() == rec._last_seq
        assert reads == [rec._last_seq]
        await equal_replay(rec, a, b)
    finally:
        await a.stop()
        await b.stop()


async def test_a_stalled_consumer_costs_one_wait_not_one_a_round():
    rec = GatedRecorder()
    a, b = await two(rec)
    try:
        await a.follower.stop()
        stalled = asyncio.Event()
        a.follower._task = asyncio.ensure_future(stalled.wait())   # following, but its consumer pushes nothing
        a.follower._arrived = asyncio.Event()
        await ok(b, "carol", M.REGISTER, body("carol", 1, 1))
        async with a.writer.lock:
            assert not await a.follower.catch_up(rec._last_seq, 0.05)   # the wait runs out: read it back
            assert await apply_to(a.writer, rec._last_seq)
        await ok(b, "carol", M.CREATE_SPACE, body("carol", 2, 2, scope="room"))
        async with a.writer.lock:   # nothing heard since: no wait at all (were it one, 60 s)
            assert not await asyncio.wait_for(a.follower.catch_up(rec._last_seq, 60), 5)
            assert await apply_to(a.writer, rec._last_seq)
        await equal_replay(rec, a, b)
    finally:
        await a.stop()
        await b.stop()


async def test_follow_mode_goes_one_round_at_a_time_unless_a_depth_is_asked_for(monkeypatch):
    from aotx.runtime.pipeline import DEPTH_ENV
    rec = GatedRecorder()
    monkeypatch.delenv(DEPTH_ENV, raising=False)
    rt = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    monkeypatch.setenv(DEPTH_ENV, "3")
    asked = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    try:
        assert (rt.commands.depth, rt.commands.follow_depth) == (2, 1)
        assert (asked.commands.depth, asked.commands.follow_depth) == (3, 3)
        await ok(rt, "alice", M.REGISTER, body("alice", 1, 1))
        subject = rt.spec.subject(lineage_for("alice").hex(), "tick")
        gate = rec.gates[subject] = asyncio.Event()
        first = sub(rt, "alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
        await wait_until_async(lambda: rec.sent.count(subject) >= 2, "alice's append sent")
        second = sub(rt, "bob", M.REGISTER, body("bob", 1, 1))
        await wait_until_async(lambda: len(rt.commands) == 1, "bob's command queued behind alice's round")
        gate.set()
        assert (await first).status == 201 and (await second).status == 201
        # bob's round was sent once alice's had landed (pipelined, it would have landed first)
        assert rec.stored(rt.spec.subject(lineage_for("bob").hex(), "tick"))[-1] > rec.stored(subject)[-1]
    finally:
        await rt.stop()
        await asked.stop()
