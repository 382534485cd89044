import pytest

from aotx.state import Capacities, CapacityFull, MutationKind, Refusal, StateError, empty_state
from aotx.state.tables import RECEIPT

from .helpers import Driver


def test_seed_defaults_and_one_bound_each():
    caps = Capacities()
    assert caps.as_tuple() == (1024, 1024, 4096, 4096, 1024, 8192, 65536)
    s = empty_state()
    assert [len(getattr(s, t)) for t in ("participants", "spaces", "conversations", "members", "receipts")] == \
        [1024, 1024, 4096, 4096, 1024]
    assert len(s.commands) == 1024 and not s.receipts.flags.writeable
    small = empty_state(Capacities(participants=2, spaces=3, conversations=4, members=5, receipts=6))
    assert [len(getattr(small, t)) for t in ("participants", "spaces", "conversations", "members", "receipts")] == \
        [2, 3, 4, 5, 6]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, 1 << 32])
def test_capacity_validation(bad):
    with pytest.raises(StateError, match="capacity spaces must be an integer"):
        Capacities(spaces=bad)


def test_receipt_row_keeps_transport_commit_admission_terminal_apart():
    assert {"transport", "commit", "admission", "terminal"} <= set(RECEIPT.names)


def full(refusal, table):
    assert isinstance(refusal, Refusal) and refusal.status == 507 and refusal.table == table
    assert f"{table} table is full" in refusal.message


def test_participants_full():
    d = Driver(Capacities(participants=1))
    d.register("alice")
    full(d.register("bob"), "participants")


def test_spaces_full():
    d = Driver(Capacities(spaces=1))
    d.register("alice")
    d.send("alice", MutationKind.CREATE_SPACE, 2, 2)
    full(d.send("alice", MutationKind.CREATE_SPACE, 3, 3), "spaces")
    assert d.state.participants[0]["next_sequence"] == 3   # nothing changed


def test_conversations_full():
    d = Driver(Capacities(conversations=1))
    d.register("alice")
    d.send("alice", MutationKind.CREATE_SPACE, 2, 2)
    d.send("alice", MutationKind.CREATE_CONVERSATION, 3, 3, d.spc("alice", 2))
    full(d.send("alice", MutationKind.CREATE_CONVERSATION, 4, 4, d.spc("alice", 2)), "conversations")


def test_members_full_but_updating_an_existing_row_fits():
    d = Driver(Capacities(members=1))
    for p in ("alice", "bob", "carol"):
        d.register(p)
    d.send("alice", MutationKind.CREATE_SPACE, 2, 2)
    space = d.spc("alice", 2)
    d.send("alice", MutationKind.SET_MEMBER, 3, 3, space, participant=d.par("bob"), permissions=["read"])
    assert d.send("alice", MutationKind.SET_MEMBER, 4, 4, space, participant=d.par("bob"),
                  permissions=[]).status == 201
    full(d.send("alice", MutationKind.SET_MEMBER, 5, 5, space, participant=d.par("carol"), permissions=[]),
         "members")


def test_receipts_full_and_command_bytes_bound():
    d = Driver(Capacities(receipts=2))
    d.register("alice")
    d.send("alice", MutationKind.CREATE_SPACE, 2, 2)
    full(d.send("alice", MutationKind.CREATE_SPACE, 3, 3), "receipts")
    small = Driver(Capacities(command_bytes=100))
    r = small.register("alice")
    assert r.status == 413 and r.table == "command bytes" and "bound per receipt is 100" in r.message


def test_capacity_full_exception_names_the_table():
    err = CapacityFull("spaces", 3)
    assert str(err) == "spaces table is full (3 rows)" and err.table == "spaces"
