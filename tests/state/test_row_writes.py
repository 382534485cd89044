"""apply_into writes a registration's, a space's and a conversation's row with one packed write each
(aotx.state.apply `_PARTICIPANT_ROW`, `_SPACE_ROW`, `_CONVERSATION_ROW`): every field of the row is what the
event says, field by field as the numpy structured table reads it; an id that is not 16 bytes is refused
before any write (a numpy row write raised only while writing, after the sequence was written)."""

import dataclasses

import pytest

from aotx.state import ApplyError, MutationKind, lineage_for, state_hash
from aotx.state.apply import apply_into, owned_copy
from aotx.state.events import ConversationCreated, ParticipantRegistered, SpaceCreated

from .helpers import Driver

M = MutationKind


def _driven() -> Driver:
    d = Driver()
    d.register("alice")
    d.register("bob")
    d.send("bob", M.CREATE_SPACE, 2, 7, scope="instance", id=f"{3:032x}")
    d.send("alice", M.CREATE_SPACE, 2, 8, scope="room", id=f"{5:032x}")
    d.send("alice", M.CREATE_CONVERSATION, 3, 9, d.spc("alice", 5), id=f"{6:032x}")
    return d


def test_each_row_holds_its_events_fields():
    d = _driven()
    s = d.state
    events = {type(e): e for e in d.log}   # (the last of each kind: alice's)
    reg = [e for e in d.log if isinstance(e, ParticipantRegistered)]
    for row, e in enumerate(reg):
        p = s.participants[row]
        assert (p["lineage"].tobytes(), p["ident"].tobytes()) == (e.op.lineage, e.participant)
        assert (int(p["retry_floor"]), int(p["next_sequence"])) == (1, 4 if row == 0 else 3)
    space = events[SpaceCreated]
    row = s.space_row(space.op.lineage, space.space)
    assert row == 1 and s.n_spaces == 2
    r = s.spaces[row]
    assert (r["lineage"].tobytes(), r["ident"].tobytes(), int(r["owner"]), int(r["scope"])) == \
        (lineage_for("alice"), space.space, 0, int(space.scope))
    assert int(s.spaces[0]["owner"]) == 1 and int(s.spaces[0]["scope"]) != int(space.scope)
    con = events[ConversationCreated]
    c = s.conversations[s.conversation_row(con.op.lineage, con.conversation)]
    assert (c["lineage"].tobytes(), c["ident"].tobytes(), int(c["space"]), int(c["creator"])) == \
        (lineage_for("alice"), con.conversation, 1, 0)
    assert s.n_conversations == 1 and not any(s.conversations[1:].tobytes())   # nothing written past the row


@pytest.mark.parametrize("kind", ["space", "conversation", "participant"])
def test_an_id_that_is_not_16_bytes_is_refused_before_any_write(kind):
    d = Driver()   # the state each event applies to, and the event with an id a byte short (or long)
    d.register("alice")
    registered = d.state
    d.send("alice", M.CREATE_SPACE, 2, 8, scope="room", id=f"{5:032x}")
    with_space = d.state
    d.send("alice", M.CREATE_CONVERSATION, 3, 9, d.spc("alice", 5), id=f"{6:032x}")
    reg, space, con = d.log
    state, event = {
        "participant": (Driver().state, dataclasses.replace(reg, participant=reg.participant[:15])),
        "space": (registered, dataclasses.replace(space, space=space.space + b"\0")),
        "conversation": (with_space, dataclasses.replace(con, conversation=con.conversation[:15])),
    }[kind]
    state = owned_copy(state)
    before = state_hash(state)
    with pytest.raises(ApplyError, match="id of"):
        apply_into(state, event)
    assert state_hash(state) == before
