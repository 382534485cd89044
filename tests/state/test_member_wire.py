"""aotx.state.member_wire / apply_member_fields: a member-rights change applied from its decoded wire Struct
does exactly what apply_into of its event does — the same state (tables, index, per-slot lists) where it
applies; where it does not, nothing written and None (apply_into raises) — and the projector, meeting a
refused one in the log, names the fault as the event's path does."""

from __future__ import annotations

import dataclasses

import pytest

from aotx.journal import Emitter, Transfer, TransferKind, lineage_hash
from aotx.journal.whole import transfer_of, whole_transfers
from aotx.journal.registry import REGISTRY
from aotx.runtime.replay import TICK_KIND, Projector, ReplayError
from aotx.state import (SCHEMA, Accepted, Actor, Capacities, Command, Grants, MemberRightsSet, MutationKind, StateError,
                        decide, encode_event, lineage_for, parse_mutation, state_hash)
from aotx.state.apply import apply_into, owned_copy
from aotx.state.member_wire import MEMBER_WIRE, apply_member_wire
from aotx.state.vocab import Rights
from ops.bench.boot import Generator

DEFER = REGISTRY.payload_decoder(TransferKind.MUTATION, frozenset({MemberRightsSet}))


@pytest.fixture(scope="module")
def gen() -> Generator:
    g = Generator(3, Capacities())
    g.setup()
    for i in range(4):   # member rows made and changed
        g.mutation(i)
    return g


def _next_member(gen: Generator) -> MemberRightsSet:
    """The set-member event participant 0's next mutation journals (decided on gen's state, not applied)."""
    name, other = gen.names[0], gen.names[1]
    body = {"schema": SCHEMA, "lineage": lineage_for(name).hex(), "operation_key": "ab" * 16,
            "sequence": str(gen.seq[name]), "participant": gen.pid[other], "permissions": ["read"]}
    decision = decide(gen.state, Command(Actor(name, Grants.all()),
                                         parse_mutation(MutationKind.SET_MEMBER, body, gen.space[name])))
    assert isinstance(decision, Accepted)
    (event,) = decision.events
    assert isinstance(event, MemberRightsSet)
    return event


def _variants(gen: Generator, e: MemberRightsSet):
    op = e.op
    own = bytes.fromhex(gen.pid[gen.names[0]].split("-")[2])   # participant 0's own participant id: the owner
    yield "valid", e
    yield "rights", dataclasses.replace(e, rights=Rights.ALL)
    yield "sequence", dataclasses.replace(e, op=dataclasses.replace(op, sequence=op.sequence + 1))
    yield "operation", dataclasses.replace(e, op=dataclasses.replace(op, operation=bytes(16)))
    yield "command", dataclasses.replace(e, op=dataclasses.replace(op, command=b" " * 9000))
    yield "lineage", dataclasses.replace(e, op=dataclasses.replace(op, lineage=bytes(16)))
    yield "space", dataclasses.replace(e, space=bytes(16))
    yield "participant", dataclasses.replace(e, participant=bytes(16))
    yield "participant lineage", dataclasses.replace(e, participant_lineage=bytes(16))
    yield "owner", dataclasses.replace(e, participant_lineage=op.lineage, participant=own)


def _same(a, b) -> None:
    assert state_hash(a) == state_hash(b) and a.applied == b.applied and a.n_members == b.n_members
    assert list(a.commands) == list(b.commands) and list(a.executions) == list(b.executions)
    for name in ("participants", "spaces", "members", "receipts", "keys", "by_lineage"):
        assert getattr(a.index, name) == getattr(b.index, name), name
    assert sorted(a.index.free) == sorted(b.index.free)


def test_the_wire_apply_does_what_apply_into_does(gen):
    outcomes = {}
    for label, e in _variants(gen, _next_member(gen)):
        wire = DEFER(encode_event(e))
        assert type(wire) is MEMBER_WIRE
        a, b = owned_copy(gen.state), owned_copy(gen.state)
        try:
            slot_a = apply_into(a, e)
        except StateError:
            slot_a = None
        assert apply_member_wire(b, wire) == slot_a, label
        _same(a, b)
        if slot_a is None:
            _same(b, gen.state)   # refused: nothing written
        outcomes[label] = slot_a is not None
    assert outcomes == {"valid": True, "rights": True, "sequence": False, "operation": False, "command": False,
                        "lineage": False, "space": False, "participant": False, "participant lineage": False,
                        "owner": False}


def _log(gen: Generator) -> list[tuple[str, int, bytes]]:
    """gen's journal messages (subject, seq, data), its lineages in turn."""
    messages = [(f"bb.j.{lineage_for(n).hex()}.{TICK_KIND}", data) for i in range(max(map(len, gen.ticks.values())))
                for n in gen.names if i < len(gen.ticks[n]) for data in [gen.ticks[n][i]]]
    return [(s, q, d) for q, (s, d) in enumerate(messages, start=1)]


def test_a_raw_item_makes_the_transfer_the_plain_call_answers(gen):
    """whole_transfers(raw=True) answers a member change as its RAW item, whose transfer_of is the plain call's
    Transfer, field for field (its instance dict: the Struct, the verified digest); every other transfer the same."""
    raws = 0
    for _, _, data in _log(gen):
        plain, raw = whole_transfers(data, {}, {}), whole_transfers(data, {}, {}, raw=True)
        assert plain is not None and raw is not None and len(plain) == len(raw)
        for t, item in zip(plain, raw):
            if type(item) is tuple:
                raws += 1
                assert type(item[4]) is MEMBER_WIRE
                item = transfer_of(item)
            assert type(item) is Transfer and item.__dict__ == t.__dict__ and item == t and item.event == t.event
    assert raws > 0


def test_boots_feed_and_a_followers_feed_give_the_same_projection(gen):
    """feed_many (member changes applied from their RAW items) and feed (from their Transfers): the same state,
    Saves, chains and bookkeeping."""
    many, one = Projector("S", "I", Capacities()), Projector("S", "I", Capacities())
    log = _log(gen)
    assert many.feed_many(log) == len(log)
    for m in log:
        one.feed(*m)
    _same(many.state, one.state)
    assert list(many.state.saves) == list(one.state.saves) and many.chains == one.chains
    assert (many.last_transfer, many.last_subject_seq, many.applied_seq, many.messages, many.transfers) == \
        (one.last_transfer, one.last_subject_seq, one.applied_seq, one.messages, one.transfers)
    assert many.reassembler.last_ids == one.reassembler.last_ids


@pytest.mark.parametrize("via", ["feed", "feed_many"])
def test_the_projector_names_a_refused_member_change_as_the_event_path_does(gen, via):
    """A member change the wire path refuses (here: a sequence already used) fails the replay with apply_into's
    error, and nothing of it is written — through a follower's feed and through boot's feed_many alike."""
    p = Projector("S", "I", Capacities())
    name = gen.names[0]
    subject = f"bb.j.{lineage_for(name).hex()}.{TICK_KIND}"
    messages = [(f"bb.j.{lineage_for(n).hex()}.{TICK_KIND}", data) for i in range(len(gen.ticks[name]))
                for n in gen.names if i < len(gen.ticks[n]) for data in [gen.ticks[n][i]]]
    p.feed_many((s, q, d) for q, (s, d) in enumerate(messages, start=1))
    stale = dataclasses.replace(_next_member(gen), op=dataclasses.replace(_next_member(gen).op, sequence=1))
    em = Emitter(lineage_hash(lineage_for(name)), next_transfer_id=p.last_transfer[lineage_hash(lineage_for(name))] + 1)
    em.submit_payload(int(TransferKind.MUTATION), encode_event(stale))
    (tick,) = em.drain()
    before, transfers = state_hash(p.state), p.transfers
    with pytest.raises(ReplayError, match=r"member.rights_set lineage [0-9a-f]{32} sequence 1: expected sequence"):
        if via == "feed":
            p.feed(subject, len(messages) + 1, tick.data)
        else:
            p.feed_many([(subject, len(messages) + 1, tick.data)])
    assert state_hash(p.state) == before and p.transfers == transfers
