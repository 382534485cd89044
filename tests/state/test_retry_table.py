"""Every row of the retry table (DESIGN §5) and the checks around it."""

from dataclasses import replace

import pytest

from aotx.state import (Accepted, ApplyError, Grants, MutationKind, Refusal, Replayed, apply, lineage_for,
                        operation_id, operation_sequence, operation_view, receipt_json)

from .helpers import Driver


@pytest.fixture
def d():
    d = Driver()
    d.register("alice", key=0xA1)
    d.send("alice", MutationKind.CREATE_SPACE, 2, 0xA2, scope="room")
    return d


def test_new_operation_gets_a_receipt_and_a_runtime_operation_id(d):
    decision = d.send("alice", MutationKind.CREATE_SPACE, 3, 0xA3)
    assert isinstance(decision, Accepted) and decision.status == 201
    event = decision.events[0]
    key = (0xA3).to_bytes(16, "big")
    assert event.op.operation == operation_id(lineage_for("alice"), 3, key) != key
    assert operation_sequence(event.op.operation) == 3
    receipt = receipt_json(d.state, d.state.receipt_slot(lineage_for("alice"), 3))
    assert receipt["operation"] == decision.operation and receipt["sequence"] == "3"
    assert receipt["kind"] == "space.create" and receipt["resource"] == d.spc("alice", 0xA3)
    assert receipt["status"] == {"transport": "accepted", "commit": "committed", "admission": "saved",
                                 "terminal": "saved"}
    assert d.state.participants[0]["next_sequence"] == 4


def test_exact_retry_returns_the_existing_receipt(d):
    before = d.state
    again = d.send("alice", MutationKind.CREATE_SPACE, 2, 0xA2, scope="room")
    assert isinstance(again, Replayed) and again.status == 200 and d.state is before
    assert receipt_json(d.state, again.slot)["sequence"] == "2"
    # the retry of a registration too
    assert isinstance(d.register("alice", key=0xA1), Replayed)
    # an omitted id and an explicit id equal to the key are the same canonical input
    assert isinstance(d.send("alice", MutationKind.CREATE_SPACE, 2, 0xA2, scope="room", id=f"{0xA2:032x}"),
                      Replayed)


@pytest.mark.parametrize("fields", [{"scope": "private"}, {"scope": "room", "id": "ab" * 16}])
def test_changed_input_is_409(d, fields):
    r = d.send("alice", MutationKind.CREATE_SPACE, 2, 0xA2, **fields)
    assert isinstance(r, Refusal) and r.status == 409 and "other canonical bytes" in r.message


def test_other_key_at_a_used_sequence_is_409(d):
    assert d.send("alice", MutationKind.CREATE_SPACE, 2, 0xB2, scope="room").status == 409


def test_future_sequence_is_409_and_changes_nothing(d):
    before = d.state
    r = d.send("alice", MutationKind.CREATE_SPACE, 5, 0xA5)
    assert r.status == 409 and "ahead of the next sequence 3" in r.message and d.state is before


def test_below_retry_floor_is_410(d):
    d.send("alice", MutationKind.RETIRE, 3, 0xA3, retry_floor="3")
    for seq, key in ((1, 0xA1), (2, 0xA2)):
        r = d.send("alice", MutationKind.CREATE_SPACE, seq, key, scope="room")
        assert r.status == 410 and f"below the retry floor 3" in r.message
    assert isinstance(d.send("alice", MutationKind.RETIRE, 3, 0xA3, retry_floor="3"), Replayed)


def test_key_reuse_before_retirement_is_409_after_is_allowed(d):
    r = d.send("alice", MutationKind.CREATE_SPACE, 3, 0xA2, id="cc" * 16)
    assert r.status == 409 and "in use by sequence 2" in r.message
    d.send("alice", MutationKind.RETIRE, 3, 0xA3, retry_floor="3")
    new = d.send("alice", MutationKind.CREATE_SPACE, 4, 0xA2, id="cc" * 16)
    assert isinstance(new, Accepted)


def test_lineage_grant_and_registration_checks():
    d = Driver()
    r = d.send("alice", MutationKind.CREATE_SPACE, 1, 1)
    assert r.status == 409 and "not registered" in r.message
    d.grants["bob"] = Grants(shared_read=True)
    r = d.register("bob")
    assert r.status == 403 and "needs the shared_write grant" in r.message
    assert d.register("carol", key=2).status == 201
    again = d.send("carol", MutationKind.REGISTER, 2, 3)
    assert again.status == 409 and "already registered" in again.message
    from aotx.state import Actor, Command, decide, parse_mutation, SCHEMA
    body = {"schema": SCHEMA, "lineage": lineage_for("carol").hex(), "operation_key": "11" * 16, "sequence": "2"}
    r = decide(d.state, Command(Actor("dave", Grants.all()), parse_mutation(MutationKind.CREATE_SPACE, body)))
    assert r.status == 409 and "is not this participant's lineage" in r.message


def test_retired_handle_never_selects_the_new_receipt_in_its_slot():
    from aotx.state import Capacities
    d = Driver(Capacities(receipts=2))
    d.register("alice", key=1)
    old = d.send("alice", MutationKind.CREATE_SPACE, 2, 2).operation
    d.send("alice", MutationKind.RETIRE, 3, 3, retry_floor="3")        # frees the slots of 1 and 2
    new = d.send("alice", MutationKind.CREATE_SPACE, 4, 2, id="dd" * 16).operation  # same key, reused slot
    actor = d.actor("alice")
    assert operation_view(d.state, actor, old).status == 410
    assert operation_view(d.state, actor, new)["operation"] == new != old
    assert operation_view(d.state, d.actor("bob"), new).status == 404
    forged = new[:-1] + ("0" if new[-1] != "0" else "1")
    assert operation_view(d.state, actor, forged).status == 404
    assert operation_view(d.state, actor, "op-nope").status == 400


def test_apply_checks_the_version_first(d):
    event = d.log[-1]
    with pytest.raises(ApplyError, match="expected sequence 3"):
        apply(d.state, event)
    with pytest.raises(ApplyError, match="already registered"):
        apply(d.state, d.log[0])
    forged = replace(event, op=replace(event.op, sequence=3))
    with pytest.raises(ApplyError, match="operation ID is not the one derived"):
        apply(d.state, forged)
    with pytest.raises(ApplyError, match="not registered"):
        apply(Driver().state, event)
