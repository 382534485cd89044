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
