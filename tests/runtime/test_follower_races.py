"""Adversarial checks of the follower's applier and a round's catch-up (aotx.runtime.follower,
aotx.runtime.catch_up): what the consumer heard is applied once, in stream order, whoever applies it;
and what was heard and then applied by someone else (a runtime's own acknowledged messages, a
read-back) does not stay heard. In memory: the recorder holds a chosen subject's acks at a gate the
test opens, so the consumer hears a runtime's own message before its round applied it."""

from __future__ import annotations

import asyncio

from aotx.runtime import SharedRuntime
from aotx.state import MutationKind, lineage_for
from tests.runtime.test_follow_pipeline import equal_replay, ok, sub
from tests.runtime.test_group_commit import body
from tests.runtime.test_pipeline import GatedRecorder
from tests.waiting import wait_until_async

M = MutationKind


def settled(rt: SharedRuntime) -> bool:
    applier = rt.follower._applier
    return applier is None or applier.done()


async def test_own_messages_heard_before_their_round_applied_them_do_not_stay_heard():
    """A runtime alone on its journal in follow mode (lease mode is follow mode): each of its own
    messages that the consumer pushes before the round's ack came joins `heard`; the round applies
    it from its ack. Nobody else writes, so no feed of heard messages ever runs: before the fix each
    such message stayed in `heard` for the life of the consumer (its bytes too) — one a command."""
    rec = GatedRecorder()
    rt = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    try:
        await ok(rt, "alice", M.REGISTER, body("alice", 1, 1))
        subject = rt.spec.subject(lineage_for("alice").hex(), "tick")
        n = 12
        for seq in range(2, 2 + n):
            gate = rec.ack_gates[subject] = asyncio.Event()   # stored; its ack waits for the gate
            task = sub(rt, "alice", M.CREATE_SPACE, body("alice", seq, seq, scope="room"))
            end = await wait_until_async(lambda: rec._last_seq if rec._last_seq >= seq else 0, "stored")
            # the follower hears it while the round waits for its ack (it holds the writer's lock)
            await wait_until_async(lambda: any(m.seq == end for m in rt.follower.heard), "heard before the ack")
            gate.set()
            assert (await task).status == 201
            assert rt.writer.applied_seq() == end
            await wait_until_async(lambda: settled(rt), "the applier done")
        assert rt.follower.applied == 0   # all of it applied from the acks, none as followed
        assert len(rt.follower.heard) == 0, [m.seq for m in rt.follower.heard]
        await equal_replay(rec, rt)
    finally:
        await rt.stop()
