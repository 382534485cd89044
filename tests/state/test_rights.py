"""Scopes, owner rights, explicit rows, zero-rights rows, grants ∩ membership, 403 vs 404."""

import pytest

from aotx.state import (Grants, MutationKind, Refusal, Rights, list_conversations, list_members, list_spaces,
                        participant_view, space_view, conversation_view)

from .helpers import Driver

M = MutationKind


@pytest.fixture
def d():
    d = Driver()
    for p in ("alice", "bob", "carol"):
        d.register(p)
    d.send("alice", M.CREATE_SPACE, 2, 0x10, scope="private")
    d.send("alice", M.CREATE_SPACE, 3, 0x11, scope="room")
    d.send("alice", M.CREATE_SPACE, 4, 0x12, scope="instance")
    return d


def visible(d, who):
    return {s["id"] for s in list_spaces(d.state, d.actor(who))["spaces"]}


def test_owner_sees_all_others_see_instance_only(d):
    assert visible(d, "alice") == {d.spc("alice", 0x10), d.spc("alice", 0x11), d.spc("alice", 0x12)}
    assert visible(d, "bob") == {d.spc("alice", 0x12)}
    assert space_view(d.state, d.actor("bob"), d.spc("alice", 0x12))["permissions"] == ["read", "write"]
    for ident in (0x10, 0x11, 0x99):   # a private space and a missing one answer the same 404
        r = space_view(d.state, d.actor("bob"), d.spc("alice", ident))
        assert r.status == 404 and r.message == f"space {d.spc('alice', ident)} not found"


def test_explicit_rows_add_and_remove(d):
    private = d.spc("alice", 0x10)
    d.send("alice", M.SET_MEMBER, 5, 0x20, private, participant=d.par("bob"), permissions=["read"])
    assert space_view(d.state, d.actor("bob"), private)["permissions"] == ["read"]
    r = d.send("bob", M.CREATE_CONVERSATION, 2, 0x30, private)
    assert r.status == 403 and "write right" in r.message
    d.send("alice", M.SET_MEMBER, 6, 0x21, private, participant=d.par("bob"), permissions=["write", "read"])
    assert d.send("bob", M.CREATE_CONVERSATION, 2, 0x30, private).status == 201
    d.send("alice", M.SET_MEMBER, 7, 0x22, private, participant=d.par("bob"), permissions=[])
    assert space_view(d.state, d.actor("bob"), private).status == 404
    assert private not in visible(d, "bob")
    assert list_members(d.state, d.actor("alice"), private)["members"] == [
        {"participant": d.par("bob"), "permissions": []}]


def test_zero_rights_row_blocks_implicit_instance_access(d):
    inst = d.spc("alice", 0x12)
    assert d.send("carol", M.CREATE_CONVERSATION, 2, 0x40, inst).status == 201
    d.send("alice", M.SET_MEMBER, 5, 0x20, inst, participant=d.par("carol"), permissions=[])
    assert space_view(d.state, d.actor("carol"), inst).status == 404
    assert d.send("carol", M.CREATE_CONVERSATION, 3, 0x41, inst).status == 404
    con = f"con-{d.par('carol')[4:36]}-{0x40:032x}"
    assert conversation_view(d.state, d.actor("carol"), con).status == 404
    assert conversation_view(d.state, d.actor("bob"), con)["space"] == inst


def test_manage_needed_for_members_owner_immutable(d):
    inst = d.spc("alice", 0x12)
    r = d.send("bob", M.SET_MEMBER, 2, 0x50, inst, participant=d.par("carol"), permissions=[])
    assert r.status == 403 and "manage right" in r.message
    r = d.send("bob", M.SET_MEMBER, 2, 0x50, d.spc("alice", 0x10), participant=d.par("carol"), permissions=[])
    assert r.status == 404                     # a private space does not leak through a 403
    d.send("alice", M.SET_MEMBER, 5, 0x20, inst, participant=d.par("bob"), permissions=["read", "manage"])
    r = d.send("bob", M.SET_MEMBER, 2, 0x50, inst, participant=d.par("alice"), permissions=[])
    assert r.status == 409 and "owner's rights" in r.message
    r = d.send("bob", M.SET_MEMBER, 2, 0x50, inst, participant=d.par("dave"), permissions=[])
    assert r.status == 404 and "participant" in r.message
    assert d.send("bob", M.SET_MEMBER, 2, 0x50, inst, participant=d.par("carol"), permissions=["read"]).status == 201


def test_current_grants_intersect_membership(d):
    private = d.spc("alice", 0x10)
    d.grants["alice"] = Grants(shared_read=True, shared_write=True)      # manage grant withdrawn
    r = d.send("alice", M.SET_MEMBER, 5, 0x20, private, participant=d.par("bob"), permissions=["read"])
    assert r.status == 403 and "shared_manage grant" in r.message
    assert space_view(d.state, d.actor("alice"), private)["permissions"] == ["read", "write"]
    d.grants["alice"] = Grants(shared_write=True)                         # no read grant: sees nothing
    assert space_view(d.state, d.actor("alice"), private).status == 403
    assert list_spaces(d.state, d.actor("alice")).status == 403
    r = d.send("alice", M.CREATE_CONVERSATION, 5, 0x20, private)
    assert r.status == 404                                                # write without read is invisible
    d.grants["alice"] = Grants(shared_read=True)
    assert d.send("alice", M.CREATE_CONVERSATION, 5, 0x20, private).status == 403


def test_scope_never_changes_and_duplicates_conflict(d):
    r = d.send("alice", M.CREATE_SPACE, 5, 0x50, id=f"{0x10:032x}", scope="instance")
    assert r.status == 409 and "already exists" in r.message
    assert space_view(d.state, d.actor("alice"), d.spc("alice", 0x10))["scope"] == "private"
    d.send("alice", M.CREATE_CONVERSATION, 5, 0x60, d.spc("alice", 0x10))
    r = d.send("alice", M.CREATE_CONVERSATION, 6, 0x61, d.spc("alice", 0x11), id=f"{0x60:032x}")
    assert r.status == 409 and "conversation" in r.message


def test_reads_lists_and_participants(d):
    private = d.spc("alice", 0x10)
    for i in range(3):
        d.send("alice", M.CREATE_CONVERSATION, 5 + i, 0x70 + i, private)
    page = list_conversations(d.state, d.actor("alice"), private, cursor=0, limit=2)
    assert len(page["conversations"]) == 2 and page["next_cursor"] == "2"
    rest = list_conversations(d.state, d.actor("alice"), private, cursor=2, limit=2)
    assert len(rest["conversations"]) == 1 and rest["next_cursor"] is None
    assert list_spaces(d.state, d.actor("alice"), limit=1)["next_cursor"] == "1"
    own = participant_view(d.state, d.actor("bob"))
    assert own == {"registered": True, "participant": d.par("bob"), "lineage": d.par("bob")[4:36],
                   "next_sequence": "2", "retry_floor": "1"}
    foreign = participant_view(d.state, d.actor("bob"), d.par("alice"))
    assert foreign["next_sequence"] is None and foreign["retry_floor"] is None
    assert participant_view(d.state, d.actor("zed"))["registered"] is False
    assert participant_view(d.state, d.actor("bob"), "par-x").status == 400
    assert isinstance(list_members(d.state, d.actor("bob"), private), Refusal)
    assert Rights.ALL.labels() == ["read", "write", "manage"]
