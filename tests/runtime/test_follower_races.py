"""Adversarial checks of the follower's applier and a round's catch-up (aotx.runtime.follower,
aotx.runtime.catch_up): what the consumer heard is applied once, in stream order, whoever applies it;
and what was heard and then applied by someone else (a runtime's own acknowledged messages, a
read-back) does not stay heard. In memory: the recorder holds a chosen subject's acks at a gate the
test opens, so the consumer hears a runtime's own message before its round applied it."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings, strategies as st

from aotx.runtime import SharedRuntime
from aotx.runtime.catch_up import apply_to
from aotx.state import MutationKind, lineage_for
from tests.runtime.test_follow_pipeline import equal_replay, ok, sub
from tests.runtime.test_follower_runs import fresh_replay_equals
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


class ClosableRecorder(GatedRecorder):
    """Keeps the follower's subscriptions, so a test can end the consumer under it (a consumer lost
    with its node: the follower makes it again from the last message applied)."""

    def __init__(self) -> None:
        super().__init__()
        self.subs: list = []

    async def subscribe(self, from_seq: int = 1, subject: str | None = None, *, headers: bool = True):
        sub = await super().subscribe(from_seq, subject, headers=headers)
        self.subs.append(sub)
        return sub


OPS = st.lists(st.one_of(st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 4)),
                         st.sampled_from(["lock", "unlock", "catch", "catch_part", "reset", "yield"])),
               min_size=4, max_size=24)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.sampled_from([1, 2]))
def test_each_message_is_applied_once_in_stream_order_whoever_applies_it(ops, depth):
    """Random interleavings of the other runtime's writes, this runtime's own, its writer's lock held
    (the follower's applier waits, its consumer goes on hearing), catch-ups to the log's end or to a
    point of it (aotx.runtime.catch_up.apply_to: what was heard, then read back), and the consumer
    ended under it (made again from the last message applied, `heard` cleared): the runtime applies
    every stream message exactly once, in stream order (its observer sees 1, 2, 3, … with no
    repeat and no hole), and ends equal to a fresh replay. Its rounds one at a time (follow mode's
    default) or pipelined two deep (asked for)."""
    asyncio.run(_interleave(ops, depth))


async def _interleave(ops: list, depth: int) -> None:
    rec = ClosableRecorder()
    a = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    b = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    a.commands.follow_depth = b.commands.follow_depth = depth
    a.follower.retry = 0.001
    seen: list[int] = []
    a.writer.observers.add(lambda applied: seen.append(applied.seq))
    tasks: list[asyncio.Task] = []
    held: list[asyncio.Event] = []
    names = iter(range(10_000))

    async def writes(rt: SharedRuntime, n: int) -> None:
        who = f"p{next(names)}"
        await ok(rt, who, M.REGISTER, body(who, 1, 1))
        for seq in range(2, n + 1):
            await ok(rt, who, M.CREATE_SPACE, body(who, seq, seq, scope="room"))

    async def hold(release: asyncio.Event) -> None:
        async with a.writer.lock:
            await release.wait()

    async def catch(part: bool) -> None:
        async with a.writer.lock:
            end = rec._last_seq
            upto = (a.writer.applied_seq() + end) // 2 if part else end
            assert await apply_to(a.writer, upto)
            assert a.writer.applied_seq() >= upto

    try:
        for op in ops:
            if isinstance(op, tuple):
                tasks.append(asyncio.ensure_future(writes(a if op[0] == "a" else b, op[1])))
            elif op == "lock":
                held.append(asyncio.Event())
                tasks.append(asyncio.ensure_future(hold(held[-1])))
            elif op == "unlock" and held:
                held.pop(0).set()
            elif op in ("catch", "catch_part"):
                tasks.append(asyncio.ensure_future(catch(op == "catch_part")))
            elif op == "reset" and rec.subs:
                await rec.subs[-1].close()
            for _ in range(3):   # (let the tasks begun interleave)
                await asyncio.sleep(0)
        for release in held:
            release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        end = rec._last_seq
        await wait_until_async(lambda: a.writer.applied_seq() == end, "a follows the log to its end")
        assert seen == list(range(1, end + 1))
        await wait_until_async(lambda: settled(a) and not a.follower.heard, "nothing left heard")
        await equal_replay(rec, a, b)
    finally:
        await a.stop()
        await b.stop()


async def test_a_runtime_alone_on_a_real_log_keeps_nothing_heard_once_its_rounds_applied_it(nats_url):
    """On a real nats-server, a runtime alone in follow mode with several lineages' commands at once:
    its consumer pushes many of its own messages before their round's acks (before the fix 120 to 128
    of its 128 stayed heard, 3 runs of 3); once the rounds applied them and the applier ran, nothing is left."""
    from aotx.runtime import submit_body
    from aotx.state import Actor, Grants
    from eventlog import StreamSpec

    spec = StreamSpec(name="FOLLOWALONE", subject_prefix="followalone.j")
    rt = await SharedRuntime(nats_url, spec, progress=False, follow=True).start()

    async def writes(who: str) -> None:
        actor = Actor(who, Grants.all())
        assert (await submit_body(rt, actor, M.REGISTER, body(who, 1, 1))).status == 201
        for seq in range(2, 9):
            out = await submit_body(rt, actor, M.CREATE_SPACE, body(who, seq, seq, scope="room"))
            assert out.status == 201, out.body

    try:
        await asyncio.wait_for(asyncio.gather(*(writes(f"q{i}") for i in range(16))), 30)
        assert rt.writer.applied_seq() == 128
        await wait_until_async(lambda: settled(rt) and not rt.follower.heard, "nothing left heard", timeout=10)
        assert rt.follower.applied == 0
    finally:
        await rt.stop()


async def one(depth: int) -> tuple[GatedRecorder, SharedRuntime, list[int]]:
    rec = GatedRecorder()
    rt = await SharedRuntime(recorder=rec, progress=False, follow=True).start()
    rt.commands.follow_depth = depth
    seen: list[int] = []
    rt.writer.observers.add(lambda applied: seen.append(applied.seq))
    return rec, rt, seen


async def test_a_pipelined_round_catching_up_applies_the_round_ahead_from_the_log_and_that_round_answers_once():
    """Pipelined in follow mode (asked for): the round behind catches up with the log, and applies there
    the round ahead's own message whose ack has not come (the log's bytes, as a replay would). The ack
    then finds it applied: nothing is applied twice, the round ahead answers 201, and its retry answers
    the same receipt."""
    rec, rt, seen = await one(depth=2)
    try:
        for who in ("alice", "bob"):
            await ok(rt, who, M.REGISTER, body(who, 1, 1))
        alice = rt.spec.subject(lineage_for("alice").hex(), "tick")
        gate = rec.ack_gates[alice] = asyncio.Event()
        raw = body("alice", 2, 2, scope="room")
        first = sub(rt, "alice", M.CREATE_SPACE, raw)
        at = await wait_until_async(lambda: rec.stored(alice)[-1] if len(rec.stored(alice)) == 2 else 0, "stored")
        await wait_until_async(lambda: any(m.seq == at for m in rt.follower.heard), "heard before its ack")
        second = await asyncio.wait_for(sub(rt, "bob", M.CREATE_SPACE, body("bob", 2, 2, scope="room")), 10)
        assert second.status == 201 and not first.done()   # behind it, answered while its ack waits
        assert rt.writer.applied_seq() > at and rt.follower.applied == 1   # alice's, applied by bob's catch-up
        gate.set()
        out = await first
        assert out.status == 201, out.body
        again = await ok(rt, "alice", M.CREATE_SPACE, raw)
        assert again == out.body   # the retry is exact
        assert seen == list(range(1, rec._last_seq + 1))
        await equal_replay(rec, rt)
    finally:
        await rt.stop()


async def test_a_lost_ack_of_a_message_the_round_behind_applied_is_answered_as_held_and_its_retry_exactly():
    """The same, but the round ahead's ack is lost (stored, answered unavailable): its command answers
    the hold (its landing unknown to it), the runtime reads the log back before its next write (the
    message is applied already: nothing twice), and a retry of the same command answers the receipt of
    what landed, as any retry of a landed command does."""
    rec, rt, seen = await one(depth=2)
    try:
        for who in ("alice", "bob"):
            await ok(rt, who, M.REGISTER, body(who, 1, 1))
        alice = rt.spec.subject(lineage_for("alice").hex(), "tick")
        gate = rec.ack_gates[alice] = asyncio.Event()
        rec.outcome[alice] = "lost"
        raw = body("alice", 2, 2, scope="room")
        first = sub(rt, "alice", M.CREATE_SPACE, raw)
        at = await wait_until_async(lambda: rec.stored(alice)[-1] if len(rec.stored(alice)) == 2 else 0, "stored")
        await wait_until_async(lambda: any(m.seq == at for m in rt.follower.heard), "heard before its ack")
        second = await asyncio.wait_for(sub(rt, "bob", M.CREATE_SPACE, body("bob", 2, 2, scope="room")), 10)
        assert second.status == 201 and rt.follower.applied == 1   # alice's, applied by bob's catch-up
        gate.set()
        out = await first
        assert out.status == 429 and out.body["error"]["type"] == "journal_hold", out.body
        again = await asyncio.wait_for(sub(rt, "alice", M.CREATE_SPACE, raw), 10)
        assert again.status == 200, again.body   # its receipt: the command had landed
        await ok(rt, "alice", M.CREATE_SPACE, body("alice", 3, 3, scope="room"))   # the next one goes on
        assert seen == list(range(1, rec._last_seq + 1))
        await equal_replay(rec, rt)
    finally:
        await rt.stop()


async def test_on_a_real_log_consumers_made_again_under_writes_and_catch_ups_apply_each_message_once(nats_url):
    """Two runtimes on a real nats-server: b writes on while a's consumer is ended under it again and
    again (made again from the last message applied, what was heard dropped), a catches up to the log's
    end under its lock in between, and a writes its own. a's observer sees every stream message once, in
    order; a ends equal to b and to a fresh replay."""
    from aotx.runtime import submit_body
    from aotx.state import Actor, Grants
    from eventlog import StreamSpec

    spec = StreamSpec(name="FOLLOWAGAIN", subject_prefix="followagain.j")
    a = await SharedRuntime(nats_url, spec, progress=False, follow=True).start()
    b = await SharedRuntime(nats_url, spec, progress=False, follow=True).start()
    a.follower.retry = 0.01
    seen: list[int] = []
    a.writer.observers.add(lambda applied: seen.append(applied.seq))
    recorder = await a.writer.connection.ensure()
    subs: list = []
    subscribe = recorder.subscribe

    async def kept(*args, **kwargs):
        subs.append(await subscribe(*args, **kwargs))
        return subs[-1]
    recorder.subscribe = kept

    async def writes(rt: SharedRuntime, who: str, n: int) -> None:
        actor = Actor(who, Grants.all())
        assert (await submit_body(rt, actor, M.REGISTER, body(who, 1, 1))).status == 201
        for seq in range(2, n + 1):
            out = await submit_body(rt, actor, M.CREATE_SPACE, body(who, seq, seq, scope="room"))
            assert out.status == 201, out.body

    try:
        await a.follower.stop()   # (made again through `kept`)
        a.follower.start()
        await wait_until_async(lambda: subs, "a follows")
        theirs = asyncio.ensure_future(asyncio.gather(*(writes(b, f"b{i}", 12) for i in range(4))))
        for i in range(6):
            mine = asyncio.ensure_future(writes(a, f"a{i}", 3))
            count, before = len(subs), a.follower.applied
            await wait_until_async(lambda: a.follower.applied > before or theirs.done(), "a follows b")
            await subs[-1].close()   # the consumer ends under it: made again from the last message applied
            async with a.writer.lock:
                end = (await recorder.stream_info()).last_seq
                assert await apply_to(a.writer, end) and a.writer.applied_seq() >= end
            await asyncio.wait_for(mine, 30)
            await wait_until_async(lambda: len(subs) > count, "a follows again")
        await asyncio.wait_for(theirs, 60)
        end = (await recorder.stream_info()).last_seq
        await wait_until_async(lambda: a.writer.applied_seq() == end, "a follows the log to its end")
        await wait_until_async(lambda: b.writer.applied_seq() == end, "b follows the log to its end")
        assert seen == list(range(1, end + 1))
        assert a.state_hash() == b.state_hash()
        await fresh_replay_equals(nats_url, spec, a)
    finally:
        await a.stop()
        await b.stop()
