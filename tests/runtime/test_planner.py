"""The batch planner (aotx.runtime.planner), pure: a state built in memory by the state core's own
apply, commands parsed from bodies, no journal and no event loop."""

from __future__ import annotations

from aotx.runtime.planner import Cmd, PlanError, accepted_answer, plan_batch, settled
from aotx.state import (Accepted, Actor, Capacities, Grants, MutationKind, Refusal, Replayed, apply, lineage_for,
                        parse_mutation)
from tests.state.helpers import Driver, body

import pytest

M = MutationKind


def cmd(who: str, kind: MutationKind, seq: int, key: int, resource: str | None = None, **fields) -> Cmd:
    return Cmd(Actor(who, Grants.all()), parse_mutation(kind, body(who, seq, key, **fields), resource))


def registered(*names: str, capacities: Capacities | None = None) -> Driver:
    d = Driver(capacities)
    for n in names:
        d.register(n)
    return d


def test_a_lineages_commands_form_one_flight_in_order_and_later_ones_see_the_earlier():
    d = registered("alice")
    batch = [cmd("alice", M.CREATE_SPACE, 2, 2, id=f"{2:032x}"),
             cmd("alice", M.CREATE_CONVERSATION, 3, 3, d.spc("alice", 2)),   # in the space still pending
             cmd("alice", M.CREATE_SPACE, 4, 4)]
    plan = plan_batch(d.state, batch)
    assert plan.flights == {lineage_for("alice"): batch}
    assert all(isinstance(c.decision, Accepted) for c in batch)
    assert (plan.final, plan.later, plan.wait, plan.failed) == ([], [], [], None)


def test_refusals_on_the_acknowledged_state_are_final_those_on_a_pending_state_are_not():
    d = registered("alice", "bob")
    stale = cmd("bob", M.CREATE_SPACE, 9, 9)                          # beyond the next sequence: 409
    first = cmd("alice", M.CREATE_SPACE, 2, 2)
    retry = cmd("alice", M.CREATE_SPACE, 2, 2)                        # exact retry of a pending command
    changed = cmd("alice", M.CREATE_SPACE, 2, 7)                      # same sequence, other bytes
    plan = plan_batch(d.state, [stale, first, retry, changed])
    assert plan.final == [stale] and isinstance(stale.decision, Refusal) and stale.decision.status == 409
    assert plan.flights == {lineage_for("alice"): [first]}
    assert plan.later == [retry, changed]
    assert isinstance(retry.decision, Replayed) and changed.decision.status == 409
    with pytest.raises(PlanError):   # its receipt is only in the pending state
        settled(d.state, retry)
    for event in first.decision.events:   # once the flight landed and applied
        d.state = apply(d.state, event)
    assert settled(d.state, retry).status == 200
    assert accepted_answer(d.state, first).body == settled(d.state, retry).body
    assert settled(d.state, changed).status == 409


def test_a_command_reading_another_lineages_pending_change_waits_with_its_lineage():
    d = registered("alice", "bob", "carol")
    d.send("alice", M.CREATE_SPACE, 2, 2, id=f"{2:032x}", scope="instance")
    member = cmd("alice", M.SET_MEMBER, 3, 3, d.spc("alice", 2), participant=d.par("bob"), permissions=["read"])
    reads = cmd("bob", M.CREATE_CONVERSATION, 2, 2, d.spc("alice", 2))   # reads bob's rights in alice's space
    after = cmd("bob", M.CREATE_SPACE, 3, 3)                              # bob's next: keeps his order
    other = cmd("carol", M.CREATE_SPACE, 2, 2)
    plan = plan_batch(d.state, [member, reads, after, other])
    assert plan.wait == [reads, after] and reads.decision is None and after.decision is None
    assert plan.flights == {lineage_for("alice"): [member], lineage_for("carol"): [other]}


def test_near_full_tables_are_decided_on_the_pending_state():
    d = registered("alice", "bob", "carol", capacities=Capacities(receipts=5))
    a, b = cmd("alice", M.CREATE_SPACE, 2, 2), cmd("bob", M.CREATE_SPACE, 2, 2)
    c = cmd("carol", M.CREATE_SPACE, 2, 2)
    plan = plan_batch(d.state, [a, b, c])
    assert plan.flights == {lineage_for("alice"): [a], lineage_for("bob"): [b]}
    # two receipts were free: carol's is refused on the pending state, final only if both land
    assert plan.later == [c] and c.decision.table == "receipts" and plan.final == []


def test_another_lineages_retirement_holds_back_no_command_while_the_receipts_have_room():
    d = registered("alice", "bob")
    d.send("alice", M.CREATE_SPACE, 2, 2)
    retire = cmd("alice", M.RETIRE, 3, 3, retry_floor="3")
    space = cmd("bob", M.CREATE_SPACE, 2, 2)
    plan = plan_batch(d.state, [retire, space])
    assert plan.wait == [] and plan.flights == {lineage_for("alice"): [retire], lineage_for("bob"): [space]}
    assert space in plan.flights[lineage_for("bob")] and isinstance(space.decision, Accepted)


def test_another_lineages_retirement_holds_back_a_command_that_would_need_its_receipts():
    d = registered("alice", "bob", capacities=Capacities(receipts=4))
    d.send("alice", M.CREATE_SPACE, 2, 2)
    d.send("bob", M.CREATE_SPACE, 2, 2)   # four receipts in use: the table is full
    retire = cmd("alice", M.RETIRE, 3, 3, retry_floor="3")   # frees two of alice's
    space = cmd("bob", M.CREATE_SPACE, 3, 3)                 # fits only if the retirement lands
    plan = plan_batch(d.state, [retire, space])
    assert plan.flights == {lineage_for("alice"): [retire]} and plan.wait == [space]


def test_an_exact_retry_of_an_acknowledged_operation_is_final():
    d = registered("alice")
    plan = plan_batch(d.state, [cmd("alice", M.REGISTER, 1, 1)])
    (retry,) = plan.final
    assert isinstance(retry.decision, Replayed)
    assert settled(d.state, retry).status == 200
