"""Cross-lineage dependencies inside one batch of commands (pure: no I/O, no asyncio).

A batch is decided before any of it is acknowledged. A command of one lineage may be decided on the
acknowledged state while another lineage's accepted, unacknowledged command of the same batch is in
flight, provided the decision reads nothing that command changes: otherwise it waits for the next
batch, so that no tick in flight relies on another that may fail.

* `touch` notes what an accepted command changes that another lineage's decision could read
  (a participant, a space — its rights too —, a conversation, freed receipts);
* `depends` answers whether a command's decision would read something another lineage touched;
* `consume` / `headroom`: table capacities only shrink under pending commands; while every table
  keeps a free row after the pending commands took theirs, each of decide's "table full" checks
  answers the same on the acknowledged and on the pending state.
"""

from __future__ import annotations

from ..state import (CancelInput, ConversationCreated, CreateConversation, MemberRightsSet, ParticipantRegistered,
                     PublishMemory, ReceiptsRetired, SetMemberRights, SpaceCreated, State, SubmitInput)

ROWS = ("receipts", "participants", "spaces", "conversations", "members")
_TAKES = {ParticipantRegistered: "participants", SpaceCreated: "spaces", MemberRightsSet: "members",
          ConversationCreated: "conversations"}
Touched = dict[tuple, bytes]    # what was changed -> the lineage whose pending command changed it


def no_rows() -> dict[str, int]:
    """Rows taken by no command yet."""
    return dict.fromkeys(ROWS, 0)


def touch(touched: Touched, lineage: bytes, events) -> None:
    """Note what an accepted, unacknowledged command changes that another lineage's decision could read."""
    for e in events:
        if isinstance(e, ParticipantRegistered):
            touched[("participant", lineage)] = lineage
        elif isinstance(e, SpaceCreated):
            touched[("space", lineage + e.space)] = lineage
        elif isinstance(e, MemberRightsSet):
            touched[("space", e.space_lineage + e.space)] = lineage
        elif isinstance(e, ReceiptsRetired):
            touched[("receipts freed",)] = lineage
        elif isinstance(e, ConversationCreated):
            touched[("conversation", lineage + e.conversation)] = lineage


def consume(consumed: dict[str, int], events) -> None:
    """At most one receipt and one table row per event (a member row counted even when it exists)."""
    for e in events:
        consumed["receipts"] += 1
        table = _TAKES.get(type(e))
        if table is not None:
            consumed[table] += 1


def headroom(state: State, consumed: dict[str, int]) -> bool:
    """Does every table keep a free row after the pending commands took theirs? Then each of
    decide's "table full" checks answers the same on the acknowledged and on the pending state."""
    caps = state.capacities
    return (state.free_receipts() > consumed["receipts"]
            and state.n_participants + consumed["participants"] < caps.participants
            and state.n_spaces + consumed["spaces"] < caps.spaces
            and state.n_conversations + consumed["conversations"] < caps.conversations
            and state.n_members + consumed["members"] < caps.members)


def depends(lineage: bytes, mutation, touched: Touched, room: bool = False) -> bool:
    """Would the decision of `lineage`'s `mutation` read something another lineage's unacknowledged
    command of this batch changed? Then it waits for the next batch, so that no tick in flight relies
    on another that may fail. (Table capacities only shrink under pending commands: deciding on them
    is safe.) `room`: every table keeps a free row after the pending commands (`headroom` on the
    acknowledged state); then receipts another lineage frees are not read — decide reads other
    lineages' receipts only as the table's free count, and that check answers "not full" whether or
    not the retirement lands."""
    def other(key: tuple) -> bool:
        owner = touched.get(key)
        return owner is not None and owner != lineage
    if not room and other(("receipts freed",)):
        return True
    m = mutation
    if isinstance(m, SetMemberRights):
        return other(("space", m.space.lineage + m.space.ident)) or other(("participant", m.participant.lineage))
    if isinstance(m, CreateConversation):
        return other(("space", m.space.lineage + m.space.ident))
    if isinstance(m, PublishMemory):  # reads the destination and the object's own space: any space counts
        return any(other(key) for key in touched if key[0] in ("space", "participant"))
    if isinstance(m, (SubmitInput, CancelInput)):  # its space is only known from the state: any space counts
        return (other(("conversation", m.conversation.lineage + m.conversation.ident))
                or any(other(key) for key in touched if key[0] in ("space", "participant")))
    return False
