"""Two writers that decide on the same state (two runtimes, each not yet past the other's last write)
may both take a shared table's last free row. The log is the truth: every event it holds applies, in
log order, on every replay (the table holds more rows than its capacity); the capacity is decide's
bound, refused there with its precise error until enough rows are freed (issue 15: the two-runtime
bench stopped both runtimes on "receipts table is full (1024 rows)" in a valid journal message)."""

from __future__ import annotations

import pytest

from aotx.state import (Accepted, Capacities, Command, MutationKind, Refusal, apply, decide, empty_state,
                        parse_mutation, state_hash)
from aotx.state.apply import apply_into, owned_copy
from aotx.state.state import Index

from .helpers import Driver, body

M = MutationKind


def decided(d: Driver, principal: str, kind: MutationKind, seq: int, key: int, space=None, **fields):
    """A decision on d's current state, NOT applied (another writer decides on the same state)."""
    return decide(d.state, Command(d.actor(principal), parse_mutation(kind, body(principal, seq, key, **fields),
                                                                       space)))


def replayed(caps: Capacities, log: list):
    """The log through `apply` and through `apply_into` (the projector's): the same state."""
    state, live = empty_state(caps), owned_copy(empty_state(caps))
    for event in log:
        state = apply(state, event)
        apply_into(live, event)
    assert state_hash(state) == state_hash(live)
    return state


def full(decision, table: str, rows: int) -> None:
    assert isinstance(decision, Refusal) and decision.status == 507 and decision.table == table, decision
    assert decision.message == f"{table} table is full ({rows} rows)"


def test_two_writers_take_the_last_receipt_row_and_every_replay_applies_both():
    caps = Capacities(receipts=3)
    d = Driver(caps)
    d.register("alice")
    d.register("bob")
    assert d.state.free_receipts() == 1
    # each writer decides on the same state: one row left, each takes it
    a = decided(d, "alice", M.CREATE_SPACE, 2, 2)
    b = decided(d, "bob", M.CREATE_SPACE, 2, 2)
    assert isinstance(a, Accepted) and isinstance(b, Accepted)
    log = d.log + list(a.events) + list(b.events)   # the log keeps both, in its order
    state = replayed(caps, log)
    assert int(state.receipts["used"].sum()) == 4 and len(state.receipts) == 4   # over the capacity
    assert state.free_receipts() == 0 and len(state.index.free) == 0
    assert state.space_row(a.events[0].op.lineage, a.events[0].space) is not None
    assert state.space_row(b.events[0].op.lineage, b.events[0].space) is not None
    # the same log the other way round applies too
    replayed(caps, d.log + list(b.events) + list(a.events))
    d.state, d.log = state, log
    # decide refuses a new row while the rows in use are at or over the capacity
    full(d.send("alice", M.CREATE_SPACE, 3, 3), "receipts", 3)
    # a retirement frees what it frees (net -1 here), even over the capacity
    assert isinstance(d.send("alice", M.RETIRE, 3, 4, retry_floor="3"), Accepted)
    assert int(d.state.receipts["used"].sum()) == 3
    full(d.send("alice", M.CREATE_SPACE, 4, 5), "receipts", 3)
    assert isinstance(d.send("bob", M.RETIRE, 3, 4, retry_floor="3"), Accepted)
    assert int(d.state.receipts["used"].sum()) == 2
    assert isinstance(d.send("alice", M.CREATE_SPACE, 4, 5), Accepted)   # one row under the capacity again
    full(d.send("bob", M.CREATE_SPACE, 4, 5), "receipts", 3)
    # a freed slot of the grown table is reused (lowest first), the table does not grow further
    assert len(d.state.receipts) == 4
    assert state_hash(replayed(caps, d.log)) == state_hash(d.state)
    # the index built from the tables alone (a snapshot's restore) is the one apply kept
    ix = Index.build(d.state)
    assert ix.receipts == d.state.index.receipts and sorted(ix.free) == sorted(d.state.index.free)


@pytest.mark.parametrize("table,caps", [
    ("participants", Capacities(participants=2)),
    ("spaces", Capacities(spaces=1)),
    ("conversations", Capacities(conversations=1)),
    ("members", Capacities(members=1)),
])
def test_two_writers_take_the_last_row_of_a_table(table, caps):
    d = Driver(caps)
    d.register("alice")
    if table != "participants":
        d.register("bob")
        d.register("carol")
    if table in ("conversations", "members"):
        d.send("alice", M.CREATE_SPACE, 2, 2, scope="instance")
        d.send("bob", M.CREATE_SPACE, 2, 2, scope="instance")
    space = {who: d.spc(who, 2) for who in ("alice", "bob")}
    if table == "participants":
        a, b = decided(d, "bob", M.REGISTER, 1, 1), decided(d, "carol", M.REGISTER, 1, 1)
        nxt = lambda dd: dd.send("dave", M.REGISTER, 1, 1)  # noqa: E731
    elif table == "spaces":
        a, b = decided(d, "bob", M.CREATE_SPACE, 2, 2), decided(d, "carol", M.CREATE_SPACE, 2, 2)
        nxt = lambda dd: dd.send("alice", M.CREATE_SPACE, 2, 2)  # noqa: E731
    elif table == "conversations":
        a = decided(d, "alice", M.CREATE_CONVERSATION, 3, 3, space["alice"])
        b = decided(d, "bob", M.CREATE_CONVERSATION, 3, 3, space["bob"])
        nxt = lambda dd: dd.send("alice", M.CREATE_CONVERSATION, 4, 4, space["alice"])  # noqa: E731
    else:
        a = decided(d, "alice", M.SET_MEMBER, 3, 3, space["alice"], participant=d.par("carol"), permissions=["read"])
        b = decided(d, "bob", M.SET_MEMBER, 3, 3, space["bob"], participant=d.par("carol"), permissions=["read"])
        nxt = lambda dd: dd.send("alice", M.SET_MEMBER, 4, 4, space["alice"], participant=d.par("bob"),  # noqa: E731
                                 permissions=["read"])
    assert isinstance(a, Accepted) and isinstance(b, Accepted), (a, b)
    log = d.log + list(a.events) + list(b.events)
    state = replayed(caps, log)
    rows = getattr(caps, table)
    assert getattr(state, f"n_{table}") == rows + 1 and len(getattr(state, table)) == rows + 1
    if table == "conversations":
        assert len(state.input_counts) == rows + 1
    d.state, d.log = state, log
    full(nxt(d), table, rows)
