"""Pipelined command rounds (aotx.runtime.pipeline): a round is decided and sent while the previous
round's append is in flight; a lineage in flight and a command reading what is in flight wait;
a failure of the round ahead (refused, lost ack, hold) leaves the round behind it right; live state
equals a fresh replay of the same log every time.

The recorder holds chosen subjects' appends at a gate the test opens, so a round stays in flight
exactly as long as the test needs."""

from __future__ import annotations

import asyncio

from aotx.runtime import SharedRuntime, submit_body
from aotx.runtime.pipeline import depth_from
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import JournalFull, JournalUnavailable
from eventlog.memory import MemoryRecorder
from tests.runtime.test_group_commit import body, par, spc
from tests.waiting import wait_until_async

M = MutationKind


class GatedRecorder(MemoryRecorder):
    """Appends of a gated subject wait for its gate; `outcome[subject]`: "full" (refused, nothing
    stored) or "lost" (stored, its ack lost) for that subject's next append."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[str, asyncio.Event] = {}
        self.outcome: dict[str, str] = {}
        self.ack_gates: dict[str, asyncio.Event] = {}
        self.sent: list[str] = []

    async def append(self, subject, payload, msg_id=None, expected_last_subject_seq=None):
        self.sent.append(subject)
        gate = self.gates.get(subject)
        if gate is not None:
            await gate.wait()
        how = self.outcome.pop(subject, None)
        if how == "full":
            raise JournalFull("journal full: maximum bytes exceeded (test)")
        ack = await super().append(subject, payload, msg_id, expected_last_subject_seq)
        ack_gate = self.ack_gates.get(subject)
        if ack_gate is not None:   # stored; its ack comes when the test opens the gate
            await ack_gate.wait()
        if how == "lost":
            raise JournalUnavailable(f"ack of message {ack.seq} lost (test)")
        return ack

    def stored(self, subject: str) -> list[int]:
        return [m.seq for m in self._messages if m.subject == subject]


class Bench:
    def __init__(self, rec: GatedRecorder, rt: SharedRuntime) -> None:
        self.rec, self.rt = rec, rt

    def sub(self, who, kind, raw, space=None) -> asyncio.Task:
        return asyncio.ensure_future(submit_body(self.rt, Actor(who, Grants.all()), kind, raw, space))

    def subject(self, who: str) -> str:
        return self.rt.spec.subject(lineage_for(who).hex(), "tick")

    def gate(self, who: str, outcome: str | None = None) -> asyncio.Event:
        gate = self.rec.gates[self.subject(who)] = asyncio.Event()
        if outcome:
            self.rec.outcome[self.subject(who)] = outcome
        return gate

    async def sent(self, who: str, times: int = 1) -> None:
        await wait_until_async(lambda: self.rec.sent.count(self.subject(who)) >= times, f"{who}'s append sent")

    async def stored(self, who: str, times: int = 1) -> None:
        await wait_until_async(lambda: len(self.rec.stored(self.subject(who))) >= times, f"{who}'s append stored")

    async def equals_replay(self) -> None:
        fresh = await SharedRuntime(recorder=self.rec, progress=False).start()
        assert fresh.state_hash() == self.rt.state_hash()
        assert fresh.projector.messages == self.rt.projector.messages
        await fresh.stop()


async def started(*names: str) -> Bench:
    rec = GatedRecorder()
    rt = await SharedRuntime(recorder=rec, progress=False).start()
    assert rt.commands.depth >= 2
    b = Bench(rec, rt)
    for who in names:   # one round each: each lineage's boot record is written
        assert (await b.sub(who, M.REGISTER, body(who, 1, 1))).status == 201
    return b


async def test_a_round_is_sent_while_the_previous_append_is_in_flight_and_applied_in_stream_order():
    b = await started("alice", "bob")
    gate = b.gate("alice")
    first = b.sub("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
    await b.sent("alice", 2)
    second = b.sub("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"))
    await b.stored("bob", 2)            # bob's round landed while alice's append is still in flight
    # bob's message is next in the stream: applied and answered now (aotx.runtime.early_apply)
    assert (await second).status == 201 and not first.done()
    assert b.rt.projector.applied_seq == b.rec.stored(b.subject("bob"))[-1]
    gate.set()
    assert (await first).status == 201
    assert b.rec.stored(b.subject("bob"))[-1] < b.rec.stored(b.subject("alice"))[-1]
    await b.equals_replay()
    await b.rt.stop()


async def test_a_queue_that_goes_message_by_message_is_split_in_two_rounds_one_behind_the_other(monkeypatch):
    import aotx.runtime.pipeline as pipeline
    rounds = []

    async def spy(writer, batch, context=None, leases=None, ahead=None):   # the real round, noted
        rounds.append(([lineage_for(c.actor.principal) for c in batch], ahead is not None))
        return await begin(writer, batch, context, leases, ahead)
    begin = pipeline.begin_round
    monkeypatch.setattr(pipeline, "begin_round", spy)
    b = await started("alice", "bob", "carol", "dave")
    b.rt.commands.split = True   # (off by default)
    rounds.clear()
    gate = b.gate("alice")
    out = [b.sub(who, M.CREATE_SPACE, body(who, 2, 2, scope="private")) for who in ("alice", "bob", "carol", "dave")]
    for who in ("bob", "carol", "dave"):
        await b.stored(who, 2)
    assert rounds == [([lineage_for("alice"), lineage_for("bob")], False),     # half of the queue, then
                      ([lineage_for("carol"), lineage_for("dave")], True)]     # the other half behind it
    assert [t.done() for t in out] == [False, True, True, True]   # (alice's message is not stored yet)
    gate.set()
    assert [(await t).status for t in out] == [201] * 4
    b.rt.commands.split = False
    rounds.clear()
    out = [b.sub(who, M.CREATE_SPACE, body(who, 3, 3, scope="private")) for who in ("alice", "bob", "carol", "dave")]
    assert [(await t).status for t in out] == [201] * 4
    # one round, whole: (planned behind the rounds before, if still in flight: those flights landed and are
    # applied, so their lineages do not wait)
    assert [lineages for lineages, _ in rounds] == [[lineage_for(w) for w in ("alice", "bob", "carol", "dave")]]
    await b.equals_replay()
    await b.rt.stop()


async def test_an_ack_behind_an_unacknowledged_message_waits_for_it():
    b = await started("alice", "bob")
    ack = b.rec.ack_gates[b.subject("alice")] = asyncio.Event()
    first = b.sub("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
    await b.stored("alice", 2)          # stored, its ack held back
    second = b.sub("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"))
    await b.stored("bob", 2)
    bob_seq = b.rec.stored(b.subject("bob"))[-1]
    await wait_until_async(lambda: any(e[0] == bob_seq for e in b.rt.writer.early._acked),
                           "bob's ack heard and held: the message before it is not applied")
    before = b.rt.projector.applied_seq
    assert before < b.rec.stored(b.subject("alice"))[-1]
    assert not second.done()
    ack.set()
    assert [(await t).status for t in (first, second)] == [201, 201]
    assert b.rt.projector.applied_seq == b.rec.stored(b.subject("bob"))[-1]
    await b.equals_replay()
    await b.rt.stop()


async def test_a_lineage_in_flight_waits_for_its_ack_and_keeps_its_order():
    b = await started("alice", "bob")
    gate = b.gate("alice")
    first = b.sub("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
    await b.sent("alice", 2)
    later = b.sub("alice", M.CREATE_SPACE, body("alice", 3, 3, scope="private"))
    other = b.sub("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"))
    await b.stored("bob", 2)
    assert b.rec.sent.count(b.subject("alice")) == 2    # alice's next tick waits for the guard it needs
    gate.set()
    assert [(await t).status for t in (first, later, other)] == [201, 201, 201]
    seqs = b.rec.stored(b.subject("alice"))
    assert len(seqs) == 3 and seqs == sorted(seqs)
    me = await b.rt.query("participant", Actor("alice", Grants.all()))
    assert me.body["next_sequence"] == "4"
    await b.equals_replay()
    await b.rt.stop()


async def test_a_command_reading_the_round_ahead_waits_for_it_landed_or_refused():
    b = await started("alice", "bob", "dave")
    assert (await b.sub("alice", M.CREATE_SPACE, body("alice", 2, 2, id=f"{2:032x}", scope="instance"))).status == 201
    conversation = body("bob", 2, 2, id=f"{2:032x}")
    # the round ahead lands: bob's read-only row is applied before his conversation is decided
    gate = b.gate("alice")
    rights = b.sub("alice", M.SET_MEMBER, body("alice", 3, 3, participant=par("bob"), permissions=["read"]),
                   spc("alice", 2))
    await b.sent("alice", 3)
    conv = b.sub("bob", M.CREATE_CONVERSATION, conversation, spc("alice", 2))
    own = b.sub("dave", M.CREATE_SPACE, body("dave", 2, 2, scope="private"))
    await b.stored("dave", 2)       # dave's round reads nothing in flight: sent behind alice's
    assert b.rec.sent.count(b.subject("bob")) == 1     # bob's reads alice's pending row: it waits
    gate.set()
    assert [(await t).status for t in (rights, conv, own)] == [201, 403, 201]
    # the round ahead is refused: bob's is decided again on what landed (still read-only), never on it
    gate = b.gate("alice", "full")
    rights = b.sub("alice", M.SET_MEMBER, body("alice", 4, 4, participant=par("bob"), permissions=["read", "write"]),
                   spc("alice", 2))
    await b.sent("alice", 4)
    conv = b.sub("bob", M.CREATE_CONVERSATION, conversation, spc("alice", 2))
    own = b.sub("dave", M.CREATE_SPACE, body("dave", 3, 3, scope="private"))
    await b.stored("dave", 3)
    assert b.rec.sent.count(b.subject("bob")) == 1
    gate.set()
    assert [(await t).status for t in (rights, conv, own)] == [429, 403, 201]
    assert len(b.rec.stored(b.subject("bob"))) == 1
    await b.equals_replay()
    del b.rec.gates[b.subject("alice")]
    assert await b.rt.probe()
    assert (await b.sub("alice", M.SET_MEMBER, body("alice", 4, 4, participant=par("bob"),
                                                     permissions=["read", "write"]), spc("alice", 2))).status == 201
    assert (await b.sub("bob", M.CREATE_CONVERSATION, conversation, spc("alice", 2))).status == 201
    await b.equals_replay()
    await b.rt.stop()


async def test_a_lost_ack_ahead_applies_the_round_behind_only_up_to_the_unknown_message():
    b = await started("alice", "bob", "carol")
    b.rt.commands.depth = 3     # alice's round, then carol's, then bob's in flight at once
    alice = b.gate("alice", "lost")
    lost = b.sub("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
    await b.sent("alice", 2)
    bob = b.gate("bob")
    carol_first = b.sub("carol", M.CREATE_SPACE, body("carol", 2, 2, scope="private"))
    await b.stored("carol", 2)      # before alice's message: nothing unknown lies before it
    behind = b.sub("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"))
    await b.sent("bob", 2)
    alice.set()                     # alice's message lands, its ack is lost: its round finishes on hold
    await b.stored("alice", 2)
    bob.set()                       # bob's lands after the unknown one: not applied now (read back later)
    assert (await lost).status == 429
    assert (await carol_first).status == 201
    deferred = await behind
    assert deferred.status == 429 and deferred.body["error"]["type"] == "journal_hold"
    assert b.rt.projector.applied_seq < b.rec.stored(b.subject("alice"))[-1]
    del b.rec.gates[b.subject("alice")], b.rec.gates[b.subject("bob")]
    assert await b.rt.probe()       # the read-back applies both, in stream order
    for who in ("alice", "bob"):    # both landed: the same input again is an exact retry
        again = await b.sub(who, M.CREATE_SPACE, body(who, 2, 2, scope="private"))
        assert again.status == 200, again.body
    await b.equals_replay()
    await b.rt.stop()


async def test_on_hold_rounds_go_one_at_a_time():
    b = await started("alice", "bob", "carol")
    b.rec.outcome[b.subject("alice")] = "full"
    assert (await b.sub("alice", M.CREATE_SPACE, body("alice", 2, 2))).status == 429
    assert b.rt.hold.active
    gate = b.gate("bob")
    first = b.sub("bob", M.CREATE_SPACE, body("bob", 2, 2))
    await b.sent("bob", 2)
    second = b.sub("carol", M.CREATE_SPACE, body("carol", 2, 2))
    await wait_until_async(lambda: len(b.rt.commands) == 1, "carol's command queued")
    assert not b.rt.commands._may_pipeline()    # the chain waits for bob's round: carol's stays queued
    assert b.rec.sent.count(b.subject("carol")) == 1
    gate.set()
    assert [(await t).status for t in (first, second)] == [201, 201]
    assert not b.rt.hold.active     # the log took bob's round: the hold lifted, pipelining again
    await b.equals_replay()
    await b.rt.stop()


def test_the_depth_from_the_environment():
    assert depth_from(None) == depth_from("") == 2
    assert depth_from("1") == 1 and depth_from(" 3 ") == 3
    assert depth_from("0") == depth_from("two") == 2
