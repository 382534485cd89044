"""Retirement: the floor only moves forward, over terminal receipts, before any slot is reused."""

from aotx.state import (Capacities, MutationKind, Replayed, Save, StateError, lineage_for, operation_view,
                        receipt_json, record_save, state_hash)

from .helpers import Driver

M = MutationKind


def test_floor_bounds():
    d = Driver()
    d.register("alice")
    d.send("alice", M.CREATE_SPACE, 2, 2)
    r = d.send("alice", M.RETIRE, 3, 3, retry_floor="4")
    assert r.status == 409 and "beyond this operation's sequence 3" in r.message
    assert d.send("alice", M.RETIRE, 3, 3, retry_floor="3").status == 201
    r = d.send("alice", M.RETIRE, 4, 4, retry_floor="2")
    assert r.status == 409 and "never moves back" in r.message
    assert d.send("alice", M.RETIRE, 4, 4, retry_floor="3").status == 201   # same floor: allowed, no-op
    assert d.state.participants[0]["retry_floor"] == 3


def test_full_receipt_table_refuses_until_a_retirement_frees_a_slot():
    d = Driver(Capacities(receipts=3))
    d.register("alice")
    d.send("alice", M.CREATE_SPACE, 2, 2)
    d.send("alice", M.CREATE_SPACE, 3, 3)
    assert d.send("alice", M.CREATE_SPACE, 4, 4).table == "receipts"
    r = d.send("alice", M.RETIRE, 4, 4, retry_floor="1")   # frees nothing while full
    assert r.status == 507 and r.table == "receipts"
    assert d.send("alice", M.RETIRE, 4, 4, retry_floor="3").status == 201
    assert d.state.free_receipts() == 1
    assert d.send("alice", M.CREATE_SPACE, 5, 5).status == 201
    retired = f"op-{lineage_for('alice').hex()}-{d.log[1].op.operation.hex()}"
    assert operation_view(d.state, d.actor("alice"), retired).status == 410


def test_non_terminal_receipts_block_retirement():
    d = Driver()
    d.register("alice")
    d.send("alice", M.CREATE_SPACE, 2, 2)
    receipts = d.state.receipts.copy()
    receipts[1]["terminal"] = 0               # as an input still running would be
    receipts.flags.writeable = False
    from dataclasses import replace
    d.state = replace(d.state, receipts=receipts)
    r = d.send("alice", M.RETIRE, 3, 3, retry_floor="3")
    assert r.status == 409 and "sequence 2 has no saved terminal result" in r.message


def test_save_fields_are_explicit_and_outside_the_hash():
    d = Driver()
    d.register("alice")
    slot = d.state.receipt_slot(lineage_for("alice"), 1)
    before = state_hash(d.state)
    save = Save("AOTX_JOURNAL", "2026-01-01T00:00:00Z", 17, "boot-1", "ab" * 16, 0, None)
    d.state = record_save(d.state, slot, save)
    assert receipt_json(d.state, slot)["save"] == {
        "source": "AOTX_JOURNAL", "incarnation": "2026-01-01T00:00:00Z", "generation": 17, "boot": "boot-1",
        "commit_digest": "ab" * 16, "pending_bytes": 0, "disk_error": None}
    assert state_hash(d.state) == before
    try:
        record_save(d.state, 5, save)
    except StateError as exc:
        assert "slot 5 is free" in str(exc)
    else:
        raise AssertionError("a free slot took save fields")
    assert isinstance(d.register("alice"), Replayed)


def test_apply_refuses_a_retirement_over_a_receipt_without_a_terminal_result_and_changes_nothing():
    """apply (the replay's rule, not decide's): the retirement event names the first such receipt, and
    the state is left as it was; a valid one frees its rows to all-zero bytes and the index forgets them."""
    from dataclasses import replace

    import numpy as np
    import pytest

    from aotx.state import ApplyError
    from aotx.state.apply import apply, apply_into, owned_copy
    d = Driver()
    d.register("alice")
    for s in (2, 3, 4):
        d.send("alice", M.CREATE_SPACE, s, s)
    d.send("alice", M.RETIRE, 5, 5, retry_floor="4")
    event = d.log[-1]
    state = d.state
    # the state before the retirement, with sequence 3's receipt not terminal (as an input still running)
    replay = Driver()
    for e in d.log[:-1]:
        replay.state = apply(replay.state, e)
    freed = [replay.state.receipt_slot(lineage_for("alice"), s) for s in (1, 2, 3)]
    assert None not in freed
    receipts = replay.state.receipts.copy()
    receipts[freed[2]]["terminal"] = 0
    receipts.flags.writeable = False
    blocked = owned_copy(replace(replay.state, receipts=receipts))
    snapshot = (blocked.receipts.tobytes(), blocked.participants.tobytes(), list(blocked.commands))
    with pytest.raises(ApplyError, match="receipt of sequence 3 is not terminal"):
        apply_into(blocked, event)
    assert (blocked.receipts.tobytes(), blocked.participants.tobytes(), list(blocked.commands)) == snapshot
    # the valid retirement: the freed rows are zero bytes, their commands and index entries gone (but the
    # lowest, which the retirement's own receipt took at once)
    own = state.receipt_slot(lineage_for("alice"), 5)
    assert own == min(freed)
    assert all(not state.receipts[slot].tobytes().strip(b"\0") for slot in freed if slot != own)
    assert all(state.commands[slot] == b"" for slot in freed if slot != own)
    assert all(state.receipt_slot(lineage_for("alice"), s) is None for s in (1, 2, 3))
    assert int(state.participants["retry_floor"][0]) == 4 and np.count_nonzero(state.receipts["used"]) == 2
