"""apply_into (the runtime's in-place apply) ≡ apply, the hash index ≡ a scan, refusals change nothing."""

import random

import numpy as np
import pytest

from aotx.state import ApplyError, Capacities, CapacityFull, MutationKind, apply, empty_state, lineage_for, state_hash
from aotx.state.apply import apply_into, owned_copy
from aotx.state.state import Index
from aotx.state.tables import match16

from .helpers import Driver

M = MutationKind
NAMES = ["alice", "bob", "carol", "dave"]


def scenario(seed: int, caps: Capacities) -> Driver:
    """A random mix of every mutation (accepted and refused) through decide + apply."""
    rng = random.Random(seed)
    d = Driver(caps)
    seq = {n: 1 for n in NAMES}
    spaces: list[str] = []
    for step in range(300):
        who = rng.choice(NAMES)
        kind = rng.choice([M.REGISTER, M.CREATE_SPACE, M.SET_MEMBER, M.SET_MEMBER, M.CREATE_CONVERSATION, M.RETIRE])
        if seq[who] == 1:
            kind = M.REGISTER
        fields, space = {}, None
        if kind is M.CREATE_SPACE:
            fields = {"scope": rng.choice(["private", "room", "instance"]), "id": f"{step:032x}"}
        elif kind is M.SET_MEMBER:
            if not spaces:
                continue
            space = rng.choice(spaces)
            fields = {"participant": d.par(rng.choice(NAMES)), "permissions": rng.choice([[], ["read"], ["read", "write"]])}
        elif kind is M.CREATE_CONVERSATION:
            if not spaces:
                continue
            space, fields = rng.choice(spaces), {"id": f"{step:032x}"}
        elif kind is M.RETIRE:
            fields = {"retry_floor": str(rng.randint(1, seq[who]))}
        key = 1 if kind is M.REGISTER else rng.getrandbits(60) + 2
        r = d.send(who, kind, seq[who], key, space, **fields)   # every body here is one its kind takes
        if r.status == 201:
            seq[who] += 1
            if kind is M.CREATE_SPACE:
                spaces.append(f"spc-{lineage_for(who).hex()}-{fields['id']}")
    return d


def scanned(state) -> Index:
    """The index as the old full-table scans saw it."""
    ix = Index()
    for i in range(state.n_participants):
        ix.participants.setdefault(state.participants[i]["lineage"].tobytes(), i)
    used = np.flatnonzero(state.receipts["used"] == 1).tolist()
    for slot in used:
        r = state.receipts[slot]
        lin = r["lineage"].tobytes()
        assert state.receipt_slot(lin, int(r["sequence"])) == int(np.flatnonzero(
            (state.receipts["used"] == 1) & (state.receipts["sequence"] == r["sequence"])
            & match16(state.receipts["lineage"], lin))[0])
        key = r["operation_key"].tobytes()
        assert state.receipt_with_key(lin, key) == int(np.flatnonzero(
            (state.receipts["used"] == 1) & match16(state.receipts["lineage"], lin)
            & match16(state.receipts["operation_key"], key))[0])
    ix.free = np.flatnonzero(state.receipts["used"] == 0).tolist()
    return ix


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("caps", [Capacities(), Capacities(participants=3, spaces=4, conversations=5, members=4,
                                                                receipts=12)])
def test_in_place_equals_pure_and_the_index_equals_a_scan(seed, caps):
    d = scenario(seed, caps)
    assert d.log
    live = owned_copy(empty_state(caps))
    pure = empty_state(caps)
    for event in d.log:
        before = state_hash(pure)
        pure_next = apply(pure, event)
        assert state_hash(pure) == before                  # apply is pure
        apply_into(live, event)
        assert state_hash(live) == state_hash(pure_next)
        pure = pure_next
    assert state_hash(live) == state_hash(d.state) and live.applied == d.state.applied == len(d.log)
    for s in (live, pure):
        ref, fresh = scanned(s), Index.build(s)
        assert s.index.participants == fresh.participants == ref.participants
        for name in ("spaces", "conversations", "members", "receipts", "keys", "by_lineage"):
            assert getattr(s.index, name) == getattr(fresh, name), name
        assert sorted(s.index.free) == sorted(fresh.free) == ref.free
        assert s.free_receipts() == int(np.count_nonzero(s.receipts["used"] == 0))
        for lin in {lineage_for(n) for n in NAMES}:
            assert s.receipts_of(lin).tolist() == np.flatnonzero(
                (s.receipts["used"] == 1) & match16(s.receipts["lineage"], lin)).tolist()


def test_a_refused_event_changes_nothing_in_place():
    d = scenario(4, Capacities(participants=3, spaces=4, conversations=5, members=4, receipts=12))
    live = owned_copy(empty_state(d.state.capacities))
    for event in d.log:
        apply_into(live, event)
    before, applied = state_hash(live), live.applied
    ix = Index.build(live)
    refused = 0
    for event in d.log:  # every event again: out of order now, each must be refused untouched
        with pytest.raises((ApplyError, CapacityFull)):
            apply_into(live, event)
        refused += 1
        assert state_hash(live) == before and live.applied == applied
    assert live.index.receipts == ix.receipts and sorted(live.index.free) == sorted(ix.free) and refused


@pytest.mark.parametrize("table", ["receipts", "spaces"])
def test_a_log_written_under_larger_capacities_replays_and_decide_refuses_new_rows(table):
    """(Before issue 15's two-runtime fix apply refused the 4th event: CapacityFull, the replay stopped.)
    A capacity is decide's bound: every event of the log applies, the table grows by the row it needs."""
    small = Capacities(receipts=3) if table == "receipts" else Capacities(spaces=2)
    big = Driver(Capacities())
    big.register("alice")
    big.send("alice", M.CREATE_SPACE, 2, 2, id=f"{2:032x}")
    big.send("alice", M.CREATE_SPACE, 3, 3, id=f"{3:032x}")
    assert big.send("alice", M.CREATE_SPACE, 4, 4, id=f"{9:032x}").status == 201
    live = owned_copy(empty_state(small))
    for event in big.log:
        apply_into(live, event)
    copied = empty_state(small)
    for event in big.log:
        copied = apply(copied, event)
    assert state_hash(live) == state_hash(copied) and live.applied == 4
    assert len(getattr(live, table)) == getattr(small, table) + 1
    d = Driver(small)
    d.state = copied
    refusal = d.send("alice", M.CREATE_SPACE, 5, 5, id=f"{5:032x}")
    assert refusal.status == 507 and refusal.table == table and refusal.message == \
        f"{table} table is full ({getattr(small, table)} rows)"
