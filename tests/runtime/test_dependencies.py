"""The cross-lineage dependency rules of one batch (aotx.runtime.dependencies), pure: real mutations
and events from the state core, no journal."""

from __future__ import annotations

import pytest

from aotx.runtime.dependencies import consume, depends, headroom, no_rows, touch
from aotx.state import Capacities, MutationKind, lineage_for, parse_mutation
from tests.state.helpers import Driver, body

M = MutationKind
A, B = lineage_for("alice"), lineage_for("bob")


def mutation(who: str, kind: MutationKind, resource: str | None = None, **fields):
    return parse_mutation(kind, body(who, 5, 5, **fields), resource)


def events(driver: Driver, who: str, kind: MutationKind, seq: int, resource: str | None = None, **fields):
    decision = driver.send(who, kind, seq, seq, resource, **fields)
    return decision.events


@pytest.fixture
def world():
    """alice and bob registered, each with a space (2) and a conversation (3) in it."""
    d = Driver()
    for who in ("alice", "bob"):
        d.register(who)
        d.send(who, M.CREATE_SPACE, 2, 2, id=f"{2:032x}", scope="instance")
        d.send(who, M.CREATE_CONVERSATION, 3, 3, d.spc(who, 2), id=f"{3:032x}")
    return d


def con(who: str) -> str:
    return f"con-{lineage_for(who).hex()}-{3:032x}"


def test_touch_names_what_an_event_changes_with_the_lineage_that_changed_it(world):
    touched: dict = {}
    touch(touched, A, events(world, "alice", M.CREATE_SPACE, 4, id=f"{9:032x}"))
    touch(touched, A, events(world, "alice", M.SET_MEMBER, 5, world.spc("alice", 2),
                             participant=world.par("bob"), permissions=["read"]))
    assert touched == {("space", A + bytes.fromhex(f"{9:032x}")): A, ("space", A + bytes.fromhex(f"{2:032x}")): A}
    fresh = Driver()
    touched = {}
    touch(touched, A, fresh.register("alice").events)
    assert touched == {("participant", A): A}


def test_a_lineage_never_depends_on_its_own_pending_changes(world):
    touched: dict = {}
    touch(touched, A, events(world, "alice", M.SET_MEMBER, 4, world.spc("alice", 2), participant=world.par("bob"),
                             permissions=["read"]))
    for m in (mutation("alice", M.CREATE_CONVERSATION, world.spc("alice", 2)),
              mutation("alice", M.INPUT, con("alice"), text="hi", model="m"),
              mutation("alice", M.PUBLISH, world.spc("alice", 2), object=f"{1:032x}", source_version="1")):
        assert not depends(A, m, touched)


def test_a_command_reading_another_lineages_pending_space_waits(world):
    touched: dict = {}
    touch(touched, A, events(world, "alice", M.SET_MEMBER, 4, world.spc("alice", 2), participant=world.par("bob"),
                             permissions=["read"]))
    # bob's decisions that read alice's space, or any space (inputs, cancellations, publications)
    assert depends(B, mutation("bob", M.CREATE_CONVERSATION, world.spc("alice", 2)), touched)
    assert depends(B, mutation("bob", M.SET_MEMBER, world.spc("alice", 2), participant=world.par("alice"),
                               permissions=["read"]), touched)
    assert depends(B, mutation("bob", M.INPUT, con("bob"), text="hi", model="m"), touched)
    assert depends(B, mutation("bob", M.CANCEL, con("bob"), target_sequence="1"), touched)
    assert depends(B, mutation("bob", M.PUBLISH, world.spc("bob", 2), object=f"{1:032x}", source_version="1"),
                   touched)
    # … but not those that read only his own lineage's rows or another space
    assert not depends(B, mutation("bob", M.CREATE_CONVERSATION, world.spc("bob", 2)), touched)
    assert not depends(B, mutation("bob", M.CREATE_SPACE), touched)
    assert not depends(B, mutation("bob", M.REGISTER), touched)


def test_a_member_row_for_a_pending_participant_waits():
    d = Driver()
    d.register("alice")
    d.send("alice", M.CREATE_SPACE, 2, 2, id=f"{2:032x}")
    touched: dict = {}
    touch(touched, B, d.register("bob").events)
    assert depends(A, mutation("alice", M.SET_MEMBER, d.spc("alice", 2), participant=d.par("bob"),
                               permissions=["read"]), touched)
    assert not depends(A, mutation("alice", M.CREATE_CONVERSATION, d.spc("alice", 2)), touched)


def test_freed_receipts_make_every_other_lineage_wait_where_a_table_is_near_full(world):
    touched: dict = {}
    touch(touched, A, events(world, "alice", M.RETIRE, 4, retry_floor="2"))
    assert touched == {("receipts freed",): A}
    assert depends(B, mutation("bob", M.REGISTER), touched)
    assert depends(B, mutation("bob", M.CREATE_SPACE), touched)
    assert not depends(A, mutation("alice", M.CREATE_SPACE), touched)
    # with room in every table (headroom on the acknowledged state) the freed receipts are not read
    assert not depends(B, mutation("bob", M.CREATE_SPACE), touched, room=True)
    assert not depends(B, mutation("bob", M.REGISTER), touched, room=True)


def test_a_conversation_created_in_the_batch_is_touched_for_inputs_to_it(world):
    touched: dict = {}
    touch(touched, A, events(world, "alice", M.CREATE_CONVERSATION, 4, world.spc("alice", 2), id=f"{8:032x}"))
    assert touched == {("conversation", A + bytes.fromhex(f"{8:032x}")): A}
    new_con = f"con-{A.hex()}-{8:032x}"
    assert depends(B, mutation("bob", M.INPUT, new_con, text="hi", model="m"), touched)
    assert not depends(B, mutation("bob", M.INPUT, con("bob"), text="hi", model="m"), touched)


def test_consume_counts_a_receipt_and_a_row_per_event(world):
    consumed = no_rows()
    consume(consumed, events(world, "alice", M.CREATE_SPACE, 4))
    consume(consumed, events(world, "alice", M.SET_MEMBER, 5, world.spc("alice", 2), participant=world.par("bob"),
                             permissions=["read"]))
    consume(consumed, events(world, "alice", M.RETIRE, 6, retry_floor="2"))
    assert consumed == {"receipts": 3, "participants": 0, "spaces": 1, "conversations": 0, "members": 1}


def test_headroom_holds_while_every_table_keeps_a_free_row():
    d = Driver(Capacities(participants=3, receipts=8))
    d.register("alice")
    consumed = no_rows()
    assert headroom(d.state, consumed)
    consumed["participants"] = 1      # 1 + 1 of 3: one row still free
    assert headroom(d.state, consumed)
    consumed["participants"] = 2      # the last row would be taken: decide on the pending state
    assert not headroom(d.state, consumed)
    consumed = no_rows()
    consumed["receipts"] = d.state.free_receipts()
    assert not headroom(d.state, consumed)
