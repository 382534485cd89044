"""The batch planner against a serial decide (aotx.runtime.planner, aotx.runtime.dependencies), hypothesis.

A batch is decided before any of it lands; its lineages' flights then land in any interleaving, each
a prefix of itself (a flight that fails stops there). Whatever lands, every landed accepted command
must be the decision a serial decide makes at its place in the log (so the log replays to the same
state, and its answer is the one a retry gets). (A refusal answered at once, `plan.final`, is
decided on the acknowledged state: it stands before the batch's pending commands in the log's order,
whatever of them lands.) Near-full tables with retirements of
other lineages in the batch are where the planner's shortcut lives: "a retirement holds no other
lineage back while every table keeps a free row" (decide reads other lineages' receipts only as the
receipts table's free count)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from aotx.runtime.planner import Ahead, Cmd, plan_batch
from aotx.state import (Accepted, Actor, Capacities, Command, Grants, MutationKind, Refusal, apply, decide,
                        lineage_for, parse_mutation)
from tests.state.helpers import Driver, body

M = MutationKind
WHO = ("alice", "bob", "carol")


def spc(who: str, ident: int) -> str:
    return f"spc-{lineage_for(who).hex()}-{ident:032x}"


@st.composite
def worlds(draw):
    caps = Capacities(receipts=draw(st.integers(4, 10)), spaces=draw(st.integers(2, 6)),
                      conversations=draw(st.integers(1, 4)))
    d = Driver(caps)
    nxt: dict[str, int] = {}
    for who in WHO:
        if isinstance(d.register(who), Accepted):
            nxt[who] = 2
    for who in list(nxt):
        for _ in range(draw(st.integers(0, 2))):
            if isinstance(d.send(who, M.CREATE_SPACE, nxt[who], nxt[who], id=f"{nxt[who]:032x}"), Accepted):
                nxt[who] += 1
    batch, seqs = [], dict(nxt)
    for _ in range(draw(st.integers(1, 10))):
        who = draw(st.sampled_from(sorted(seqs)))
        seq = seqs[who]
        kind = draw(st.sampled_from(["space", "retire", "conv", "retry"]))
        if kind == "space":
            m = parse_mutation(M.CREATE_SPACE, body(who, seq, seq, id=f"{seq:032x}"))
        elif kind == "retire":
            m = parse_mutation(M.RETIRE, body(who, seq, seq, retry_floor=str(draw(st.integers(1, seq)))))
        elif kind == "conv":
            owner = draw(st.sampled_from(WHO))
            m = parse_mutation(M.CREATE_CONVERSATION, body(who, seq, seq), spc(owner, draw(st.integers(2, 4))))
        else:   # an exact retry of its registration (gone once a retirement passed it)
            batch.append(Cmd(Actor(who, Grants.all()), parse_mutation(M.REGISTER, body(who, 1, 1))))
            continue
        seqs[who] = seq + 1
        batch.append(Cmd(Actor(who, Grants.all()), m))
    return d.state, batch, draw(st.randoms(use_true_random=False))


def same(a, b) -> bool:
    if isinstance(a, Refusal) or isinstance(b, Refusal):
        return isinstance(a, Refusal) and isinstance(b, Refusal) and (a.status, a.type) == (b.status, b.type)
    if isinstance(a, Accepted) or isinstance(b, Accepted):
        return isinstance(a, Accepted) and isinstance(b, Accepted) and a.events == b.events
    return type(a) is type(b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_what_lands_is_what_a_serial_decide_makes_there(world):
    live, batch, rnd = world
    plan = plan_batch(live, batch)
    assert plan.failed is None
    for _ in range(4):   # several landings of the same plan
        flights = {lineage: list(cmds[:rnd.randint(0, len(cmds))]) for lineage, cmds in plan.flights.items()}
        state = live
        order = [lineage for lineage, cmds in flights.items() for _ in cmds]
        rnd.shuffle(order)
        for lineage in order:
            c = flights[lineage].pop(0)
            serial = decide(state, Command(c.actor, c.mutation))
            assert same(serial, c.decision), (c.mutation, c.decision, serial)
            for event in c.decision.events:
                state = apply(state, event)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.integers(0, 10))
def test_a_round_planned_behind_one_in_flight_lands_in_any_interleaving_with_it_as_a_serial_decide_makes(world, cut):
    """Pipelined (aotx.runtime.pipeline): a batch planned behind a round in flight (`Ahead`), on the
    same acknowledged state; both rounds' flights land in any interleaving, each a prefix."""
    live, batch, rnd = world
    first = plan_batch(live, batch[:cut])
    assert first.failed is None
    # some of its flights landed whole and are applied before the second is planned (early apply, or
    # a follow-mode catch-up): the second is planned on that state, and those lineages hold nothing
    applied = {lineage for lineage in first.flights if rnd.random() < 0.5}
    now = live
    for lineage in applied:
        for c in first.flights[lineage]:
            assert same(decide(now, Command(c.actor, c.mutation)), c.decision)
            for event in c.decision.events:
                now = apply(now, event)
    second = plan_batch(now, batch[cut:], ahead=Ahead.of([first.ahead], frozenset(applied)))
    assert second.failed is None
    assert not (set(first.flights) - applied) & set(second.flights)   # a lineage in flight waits for its round
    flights = {**{k: v for k, v in first.flights.items() if k not in applied}, **second.flights}
    for _ in range(4):
        landing = {lineage: list(cmds[:rnd.randint(0, len(cmds))]) for lineage, cmds in flights.items()}
        state = now
        order = [lineage for lineage, cmds in landing.items() for _ in cmds]
        rnd.shuffle(order)
        for lineage in order:
            c = landing[lineage].pop(0)
            serial = decide(state, Command(c.actor, c.mutation))
            assert same(serial, c.decision), (c.mutation, c.decision, serial)
            for event in c.decision.events:
                state = apply(state, event)
