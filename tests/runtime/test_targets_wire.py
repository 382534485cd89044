"""A member-rights change a follower reads from the log reaches its readers without its event being built.

The feed leaves such a transfer as its checked Struct (Transfer.wire; aotx.state.member_wire): targets_of
names its space from the Struct and the executor skips it (no cancellation), so the event stays unbuilt;
the answers are those of the built event."""

from __future__ import annotations

from aotx.journal import TransferKind
from aotx.journal.transfer import encode_transfer
from aotx.journal.whole import whole_transfers
from aotx.runtime.observers import Applied
from aotx.runtime.targets import targets_of
from aotx.state import MemberRightsSet, encode_event
from aotx.state.events import OpHeader
from aotx.state.vocab import Rights


def _member_transfer():
    op = OpHeader(bytes(range(16)), 3, bytes(8) + bytes(range(8)), bytes(range(1, 17)), b'{"x":1}')
    event = MemberRightsSet(op, bytes([9] * 16), bytes([1] * 16), bytes([2] * 16), bytes([3] * 16), Rights.READ)
    _, records = encode_transfer(int(TransferKind.MUTATION), 5, 77, encode_event(event))
    (t,) = whole_transfers(b"".join(records), {}, {})
    return t, event


def test_targets_of_a_member_change_read_from_the_log_name_its_space_without_building_its_event():
    t, event = _member_transfer()
    got = targets_of(Applied("s", 1, (t,)))
    assert "event" not in t.__dict__   # (the Struct answered)
    assert got.spaces == {event.space_lineage + event.space} and not got.ops and not got.conversations
    built, _ = _member_transfer()
    built.event   # the same transfer with its event built: the event's answer
    assert targets_of(Applied("s", 1, (built,))).spaces == got.spaces
