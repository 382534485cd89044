"""Two state-only runtimes on one journal in follow mode (issue 15 part 2, first step): each writes
its own lineages, each applies the other's in stream order, both states equal a fresh replay, and
readers of one are woken by the other's writes."""

from __future__ import annotations

import asyncio
import json
import time

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Capacities, Grants, MutationKind, lineage_for
from eventlog import StreamSpec

ALL = Grants.all()


def body(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


async def until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        await asyncio.sleep(0.01)


async def register_and_space(rt, name: str) -> str:
    actor = Actor(name, ALL)
    assert (await submit_body(rt, actor, MutationKind.REGISTER, body(name, 1))).status == 201
    out = await submit_body(rt, actor, MutationKind.CREATE_SPACE, body(name, 2, scope="room"))
    assert out.status == 201, out.body
    return out.body["resource"]


async def test_two_runtimes_follow_each_other_and_equal_a_fresh_replay(cluster):
    spec = StreamSpec(name="TWORT", subject_prefix="two.j")
    a = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), follow=True).start()
    b = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), follow=True).start()
    try:
        # alice's lineage goes to a, bob's to b, at the same time
        alice_space, bob_space = await asyncio.gather(register_and_space(a, "alice"), register_and_space(b, "bob"))
        await until(lambda: a.state_hash() == b.state_hash(), what="a and b converge")
        # a decides on b's writes: alice makes bob (registered through b) a member of her room
        bob = (await b.query("participant", Actor("bob", ALL))).body["participant"]
        out = await submit_body(a, Actor("alice", ALL), MutationKind.SET_MEMBER,
                                body("alice", 3, participant=bob, permissions=["read", "write"]), alice_space)
        assert out.status == 201, out.body
        # and b serves the read of it at once: bob (whose runtime is b) sees alice's room, b having applied
        # the log up to where it ended when the read arrived (aotx.runtime.read_fresh), follower or not
        out = await b.query("space", Actor("bob", ALL), space=alice_space)
        assert out.status == 200, out.body
        # many more writes on both, interleaved in the stream
        async def conversations(rt, name, space, first, n):
            for seq in range(first, first + n):
                out = await submit_body(rt, Actor(name, ALL), MutationKind.CREATE_CONVERSATION, body(name, seq), space)
                assert out.status == 201, out.body
        await asyncio.gather(conversations(a, "alice", alice_space, 4, 15), conversations(b, "bob", bob_space, 3, 15))
        await until(lambda: a.state_hash() == b.state_hash(), what="a and b converge again")
        # (while both write, a runtime's own round may read the other's messages back before its follower
        # hears them: who applied which is timing; that each applies all, in stream order, is not)
        followed = a.follower.applied
        await conversations(b, "bob", bob_space, 18, 1)       # a writes nothing now: only its follower applies it
        await until(lambda: a.state_hash() == b.state_hash(), what="a follows b's last write")
        assert a.follower.applied > followed
        fresh = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth()).start()
        try:
            assert fresh.state_hash() == a.state_hash() == b.state_hash()
        finally:
            await fresh.stop()
    finally:
        await a.stop()
        await b.stop()


async def test_two_runtimes_that_both_take_the_last_receipt_keep_running_and_replay(cluster):
    """Issue 15 (the H200 two-runtime bench: both runtimes stopped on "receipts table is full (1024 rows)"
    in a valid journal message, and so would every boot of that journal). Each runtime decides on its
    own applied state; here neither follows the other, so each sees the other's writes only when its
    own next write reads them back: a and b both take the one receipt row left. Both keep running,
    every replay applies both, and the next new operation is refused at decide time (507)."""
    spec = StreamSpec(name="TWOFULL", subject_prefix="twofull.j")
    caps = Capacities(receipts=3)
    a = await SharedRuntime(cluster.urls, spec, caps, progress=False, nats_auth=cluster.auth()).start()
    b = await SharedRuntime(cluster.urls, spec, caps, progress=False, nats_auth=cluster.auth()).start()
    alice, bob = Actor("alice", ALL), Actor("bob", ALL)
    try:
        assert (await submit_body(a, alice, MutationKind.REGISTER, body("alice", 1))).status == 201
        assert (await submit_body(b, bob, MutationKind.REGISTER, body("bob", 1))).status == 201   # b: 2 rows used
        out = await submit_body(a, alice, MutationKind.CREATE_SPACE, body("alice", 2, scope="room"))
        assert out.status == 201, out.body                                  # the last row, as a and the log see it
        assert b.state.free_receipts() == 1                                 # b has not seen it yet
        out = await submit_body(b, bob, MutationKind.CREATE_SPACE, body("bob", 2, scope="room"))
        assert out.status == 201, out.body                                  # b took it too: 4 rows in the log
        assert b.failed is None and len(b.state.receipts) == 4 and int(b.state.receipts["used"].sum()) == 4
        for rt, who, name in ((a, alice, "alice"), (b, bob, "bob")):   # refused at decide time, nothing written
            out = await submit_body(rt, who, MutationKind.CREATE_SPACE, body(name, 3, scope="room"))
            assert out.status == 507 and out.body["error"]["message"] == "receipts table is full (3 rows)", out.body
        # a retirement frees what it frees, over the capacity too (each reads the other's writes back first)
        for rt, who, name in ((a, alice, "alice"), (b, bob, "bob")):
            out = await submit_body(rt, who, MutationKind.RETIRE, body(name, 3, retry_floor="3"))
            assert out.status == 201, out.body
        assert (await submit_body(a, alice, MutationKind.REGISTER, body("alice", 1))).status == 410
        fresh = await SharedRuntime(cluster.urls, spec, caps, progress=False, nats_auth=cluster.auth()).start()
        try:   # the boot that failed closed before: the same state as b, which wrote last
            assert fresh.failed is None and fresh.state_hash() == b.state_hash()
            assert int(fresh.state.receipts["used"].sum()) == 2
        finally:
            await fresh.stop()
        assert a.failed is None and b.failed is None
    finally:
        await a.stop()
        await b.stop()


async def test_a_round_is_decided_on_the_log_as_it_is_when_the_round_begins(cluster):
    """docs/SCALE.md §3: a revocation another runtime acknowledged before a command's round is seen by
    its decision, however far behind the follower is (here: stopped)."""
    spec = StreamSpec(name="TWOCATCH", subject_prefix="twocatch.j")
    a = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), follow=True).start()
    b = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), follow=True).start()
    alice, bob = Actor("alice", ALL), Actor("bob", ALL)
    try:
        room, _ = await asyncio.gather(register_and_space(a, "alice"), register_and_space(b, "bob"))
        await until(lambda: a.state_hash() == b.state_hash(), what="a and b converge")
        par = (await b.query("participant", bob)).body["participant"]
        out = await submit_body(a, alice, MutationKind.SET_MEMBER, body("alice", 3, participant=par,
                                                                        permissions=["read", "write"]), room)
        assert out.status == 201, out.body
        out = await submit_body(b, bob, MutationKind.CREATE_CONVERSATION, body("bob", 3), room)
        assert out.status == 201, out.body                        # bob writes in alice's room
        await b.follower.stop()                                   # b hears nothing of a from here on
        out = await submit_body(a, alice, MutationKind.SET_MEMBER, body("alice", 4, participant=par,
                                                                        permissions=["read"]), room)
        assert out.status == 201, out.body                        # acknowledged: bob may only read now
        out = await submit_body(b, bob, MutationKind.CREATE_CONVERSATION, body("bob", 4), room)
        assert out.status == 403 and "write right" in out.body["error"]["message"], out.body
        assert b.state_hash() == a.state_hash()
    finally:
        await a.stop()
        await b.stop()
