"""The broker (aotx.runtime.broker) and what each applied message concerns (aotx.runtime.targets), on a
real runtime: a subscription hears only what concerns its operation or conversation, in journal
order, with output bytes as deltas; a full queue never blocks the writer and turns into a resync;
a dropped subscription is forgotten; the announcement wire (aotx.runtime.announce) round-trips."""

from __future__ import annotations

import asyncio
import gc

import pytest

from aotx.runtime import Broker, SharedRuntime, Targets, parse_submission
from aotx.runtime.announce import AnnouncementError, pack_targets, unpack_targets
from aotx.state import (Actor, Execution, ExecutionContext, Grants, ModelCaps, MutationKind, lineage_for,
                        operation_sequence, parse_id, IdKind)
from aotx.state.execution import InputCompleted, LeaseApplied, OutputAppended, default_lease
from eventlog.memory import MemoryRecorder

from .test_group_commit import body, par

M = MutationKind
MODEL = "scripted"
ACTORS = {name: Actor(name, Grants.all()) for name in ("alice", "bob")}


class World:
    """alice's room space with two conversations; inputs admitted, their execution journalled here."""

    def __init__(self, rt: SharedRuntime) -> None:
        self.rt, self.seq = rt, {"alice": 0, "bob": 0}

    async def submit(self, who: str, kind: MutationKind, resource: str | None = None, **fields):
        self.seq[who] += 1
        out = await self.rt.submit(ACTORS[who], parse_submission(kind, body(who, self.seq[who], self.seq[who],
                                                                           **fields), resource))
        assert out.status in (201, 202), out.body
        return out.body

    async def execute(self, who: str, op: str, *chunks: bytes, end: bool = True) -> None:
        lineage, seq = lineage_for(who), operation_sequence(parse_id(op, IdKind.OPERATION).ident)
        journal = self.rt.executions.journal
        assert await journal(lineage, [LeaseApplied(lineage, default_lease(lineage, seq, 0))]) is None
        offset = 0
        for chunk in chunks:
            assert await journal(lineage, [OutputAppended(lineage, seq, offset, chunk)]) is None
            offset += len(chunk)
        if end:
            assert await journal(lineage, [InputCompleted(lineage, seq, Execution.COMPLETED, 1, len(chunks),
                                                          "stop")]) is None


@pytest.fixture
async def world():
    rt = await SharedRuntime(recorder=MemoryRecorder(), progress=False).start()
    rt.context = ExecutionContext({MODEL: ModelCaps(b"\x01" * 32)}, 8)   # inputs admitted; run by the test
    w = World(rt)
    await w.submit("alice", M.REGISTER)
    await w.submit("bob", M.REGISTER)
    w.space = (await w.submit("alice", M.CREATE_SPACE, scope="room"))["resource"]
    w.other_space = (await w.submit("alice", M.CREATE_SPACE, scope="room"))["resource"]
    w.con_a = (await w.submit("alice", M.CREATE_CONVERSATION, w.space))["resource"]
    w.con_b = (await w.submit("alice", M.CREATE_CONVERSATION, w.space))["resource"]
    w.con_c = (await w.submit("alice", M.CREATE_CONVERSATION, w.other_space))["resource"]
    yield w
    await rt.stop()


async def test_a_subscription_hears_only_what_concerns_it_with_output_bytes_in_order(world):
    w, broker = world, world.rt.broker
    sub_a, sub_b = broker.conversation(w.con_a), broker.conversation(w.con_b)
    receipt = await w.submit("alice", M.INPUT, w.con_b, text="hi", model=MODEL)
    op = receipt["operation"]
    seq = operation_sequence(parse_id(op, IdKind.OPERATION).ident)
    sub_op = broker.operation(op)
    sub_other = broker.operation(f"op-{lineage_for('alice').hex()}-{seq + 1:016x}{0:016x}")   # the next input's
    assert not sub_a.pending and sub_b.pending
    assert sub_b.take().resync   # the admission: read again
    await w.execute("alice", op, b"one ", "τwo".encode(), b" three")
    batch = sub_op.take()
    assert not batch.resync
    assert [type(e) for e in batch.deltas] == [OutputAppended] * 3 + [InputCompleted]
    assert b"".join(e.data for e in batch.deltas[:3]) == "one τwo three".encode()
    assert not sub_a.pending and not sub_b.pending and not sub_other.pending   # execution: its operation only
    assert sub_a.wakeups == 0 and broker.stats.wakeups == 2


async def test_rights_retirement_cancellation_and_boot_wake_whom_they_concern(world):
    w, broker = world, world.rt.broker
    op = (await w.submit("alice", M.INPUT, w.con_a, text="hi", model=MODEL))["operation"]
    subs = {"a": broker.conversation(w.con_a), "b": broker.conversation(w.con_b),
            "c": broker.conversation(w.con_c), "op": broker.operation(op)}

    def woken() -> set[str]:
        return {name for name, sub in subs.items() if sub.pending and sub.take().resync}

    await w.submit("alice", M.SET_MEMBER, w.space, participant=par("bob"), permissions=["read"])
    assert woken() == {"a", "b", "op"}          # every conversation of the space and every input in it
    await w.submit("alice", M.SET_MEMBER, w.other_space, participant=par("bob"), permissions=["read"])
    assert woken() == {"c"}
    await w.submit("alice", M.CANCEL, w.con_a, target_sequence=str(w.seq["alice"] - 2))
    assert woken() == {"a", "op"}
    await w.execute("alice", op, end=False)      # the lease alone changes nothing a stream shows
    assert woken() == set()
    lineage, seq = lineage_for("alice"), operation_sequence(parse_id(op, IdKind.OPERATION).ident)
    assert await w.rt.executions.journal(lineage, [InputCompleted(lineage, seq, Execution.CANCELLED)]) is None
    subs["op"].take()
    await w.submit("alice", M.RETIRE, retry_floor=str(seq))          # below the floor: not this input
    assert woken() == set()
    await w.submit("alice", M.RETIRE, retry_floor=str(w.seq["alice"]))
    assert woken() == {"op"}
    w.rt.changes.everyone()                       # what a grant reload or a boot record does
    assert woken() == {"a", "b", "c", "op"}


def _key(resource: str) -> bytes:
    """lineage ‖ ident of a spc-/con- ID."""
    rid = parse_id(resource, IdKind.SPACE if resource.startswith("spc-") else IdKind.CONVERSATION)
    return rid.lineage + rid.ident


async def test_a_rights_change_names_its_space_resolved_once_a_subscription_and_in_full_for_announcements(world):
    w, broker = world, world.rt.broker
    heard: list[Targets] = []
    w.rt.changes.add(heard.append)
    op = (await w.submit("alice", M.INPUT, w.con_a, text="hi", model=MODEL))["operation"]
    await w.submit("alice", M.SET_MEMBER, w.space, participant=par("bob"), permissions=["read"])
    t = heard[-1]
    assert t.spaces == {_key(w.space)} and not t.conversations and not t.ops   # no table scan per event
    full = w.rt.changes.concrete(t)   # what the split deployment's announcer sends: what is in it now
    assert full.conversations == {_key(w.con_a), _key(w.con_b)} and full.ops == {_key_op(op)} and not full.everyone
    assert unpack_targets(pack_targets(full)).conversations == full.conversations
    assert unpack_targets(pack_targets(t)).everyone     # a space left unnamed on the wire: every reader
    # a subscription whose operation is not in the state yet lies in no space (its read would refuse it):
    # asked again at each rights change until it is placed
    nxt = f"op-{lineage_for('alice').hex()}-{w.seq['alice'] + 2:016x}{0:016x}"   # after the next set-member
    sub = broker.operation(nxt)
    assert sub.space is None
    await w.submit("alice", M.SET_MEMBER, w.other_space, participant=par("bob"), permissions=["read"])
    assert not sub.pending and sub.space is None
    assert _key_op((await w.submit("alice", M.INPUT, w.con_c, text="hi", model=MODEL))["operation"]) == sub.op
    sub.take()   # its admission
    await w.submit("alice", M.SET_MEMBER, w.space, participant=par("bob"), permissions=["read", "write"])
    assert not sub.pending and sub.space == _key(w.other_space)   # placed: another space's change passes it
    await w.submit("alice", M.SET_MEMBER, w.other_space, participant=par("bob"), permissions=[])
    assert sub.pending and sub.take().resync


def _key_op(op: str) -> tuple[bytes, int]:
    return lineage_for("alice"), operation_sequence(parse_id(op, IdKind.OPERATION).ident)


async def test_the_change_feed_does_nothing_while_no_sink_listens(world):
    w, broker = world, world.rt.broker
    heard: list[Targets] = []
    w.rt.changes.add(heard.append, listening=lambda: False)
    assert not broker.listening()
    await w.submit("alice", M.INPUT, w.con_a, text="hi", model=MODEL)
    await w.submit("alice", M.SET_MEMBER, w.space, participant=par("bob"), permissions=["read"])
    assert heard == []
    sub = broker.conversation(w.con_a)   # a reader: the feed works again, for every sink
    assert broker.listening()
    await w.submit("alice", M.SET_MEMBER, w.space, participant=par("bob"), permissions=[])
    assert [t.spaces for t in heard] == [{_key(w.space)}] and sub.pending and sub.take().resync
    sub.close()
    assert not broker.listening()


async def test_a_full_queue_never_blocks_the_writer_and_becomes_a_resync(world):
    w = world
    broker = w.rt.broker
    broker.queue_size = 3
    op = (await w.submit("alice", M.INPUT, w.con_a, text="hi", model=MODEL))["operation"]
    sub = broker.operation(op)
    await w.execute("alice", op, *(bytes([65 + i]) for i in range(10)))   # 11 deltas into a queue of 3
    assert sub.overflowed and broker.stats.overflows == 1
    batch = sub.take()
    assert batch.resync and batch.deltas == [] and sub.resyncs == 1 and not sub.pending
    assert w.rt.state.executions[w.rt.state.receipt_slot(lineage_for("alice"), w.seq["alice"])].output == b"ABCDEFGHIJ"


async def test_a_closed_or_dropped_subscription_is_forgotten(world):
    w, broker = world, world.rt.broker
    with broker.conversation(w.con_a) as sub:
        assert broker.subscriptions() == [sub]
    assert broker.subscriptions() == [] and sub.closed
    broker.conversation(w.con_a)   # its holder drops it at once (a stream that never started)
    gc.collect()
    assert broker.subscriptions() == []
    await w.submit("alice", M.INPUT, w.con_a, text="hi", model=MODEL)   # delivering to nobody is fine
    assert broker.stats.wakeups == 0


async def test_wait_returns_on_a_change_and_times_out_without_one(world):
    w, broker = world, world.rt.broker
    sub = broker.conversation(w.con_a)
    assert await sub.wait(0.05) is False
    waiter = asyncio.ensure_future(sub.wait(3600))
    await asyncio.sleep(0)
    await w.submit("alice", M.INPUT, w.con_a, text="hi", model=MODEL)
    assert await asyncio.wait_for(waiter, 30) is True and sub.take().resync


def test_announcements_round_trip_and_refuse_what_is_not_one():
    lin = bytes(range(16))
    t = Targets(ops={(lin, 7)}, conversations={lin + bytes(16)}, floors={lin: 4},
                deltas={(lin, 9): [OutputAppended(lin, 9, 0, b"x")]})
    back = unpack_targets(pack_targets(t))
    assert back == Targets(ops={(lin, 7), (lin, 9)}, conversations={lin + bytes(16)}, floors={lin: 4})
    assert unpack_targets(pack_targets(Targets(everyone=True))).everyone
    assert unpack_targets(b"").everyone   # a runtime of before targeted announcements: everyone
    for bad in (b"\xc1", b"\x90", pack_targets(t)[:-3]):
        with pytest.raises(AnnouncementError):
            unpack_targets(bad)


def test_broker_without_a_loop_running_subscribes_and_delivers():
    broker = Broker(queue_size=2)
    con = f"con-{lineage_for('alice').hex()}-{1:032x}"
    sub = broker.conversation(con)
    broker.deliver(Targets(conversations={bytes.fromhex(con[4:36]) + (1).to_bytes(16, "big")}))
    assert sub.pending and sub.take().resync
    assert broker.operation("op-nonsense").op is None


# it stops the runtime the `world` fixture started: on the fixtures' (session) loop, or the stop waits out
# cancel_and_wait's bound for tasks of a loop that is not running (6 s)
@pytest.mark.asyncio(loop_scope="session")
async def test_a_new_boots_first_write_on_a_lineage_wakes_everyone(world):
    """A runtime.boot control record (a new boot's first write on a lineage) concerns every reader."""
    w = world
    recorder = w.rt.recorder
    await w.rt.stop()
    rt = await SharedRuntime(recorder=recorder, progress=False).start()
    try:
        subs = [rt.broker.conversation(c) for c in (w.con_a, w.con_c)]
        w.rt = rt
        await w.submit("alice", M.CREATE_SPACE, scope="room")   # nothing a stream shows, but a new boot's record
        assert all(s.pending and s.take().resync for s in subs)
        await w.submit("alice", M.CREATE_SPACE, scope="room")   # the same boot again: nobody
        assert not any(s.pending for s in subs)
    finally:
        await rt.stop()
