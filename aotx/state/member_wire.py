"""A member-rights change applied from its decoded wire Struct, without building the event (the feed's hot path).

The reassembler's fast path decodes a MUTATION transfer holding a `member.rights_set` body into the
registry's msgspec Struct of that kind, checked as its event's builder checks it (aotx.state.codec defers
the kind: Transfer.wire; Transfer.event is built only when something reads it). `apply_member_wire` gives
its fields, in the event's order, to `apply_member_fields` (aotx.state.apply): the same checks and writes
as `apply_into` of the event. Where the event does not apply it writes nothing and answers None, and the
projector applies the event instead, whose `apply_into` names the fault as it always has.
"""

from __future__ import annotations

from typing import Any

from .apply import apply_member_fields
from .codec import REGISTRY
from .events import MemberRightsSet
from .state import State

_KIND = REGISTRY.kind_for(MemberRightsSet)
MEMBER_WIRE: type = _KIND.struct   # the Struct Transfer.wire holds for a member-rights change
# the Struct's fields, in the order apply_member_fields takes them (registered leaves: OpHeader's, then the event's)
_ORDER = ("op_lineage", "op_sequence", "op_operation", "op_operation_key", "op_command", "space_lineage", "space",
          "participant_lineage", "participant", "rights")
if tuple(MEMBER_WIRE.__struct_fields__) != ("v", *_ORDER):
    raise TypeError(f"MemberRightsSet's Struct fields {MEMBER_WIRE.__struct_fields__} are not {_ORDER}")


def apply_member_wire(state: State, s: Any) -> int | None:
    """apply_into of the member-rights change `s` (a MEMBER_WIRE) on an owned state: the receipt slot written,
    or None (nothing written) where it does not apply."""
    return apply_member_fields(state, s.op_lineage, s.op_sequence, s.op_operation, s.op_operation_key, s.op_command,
                               s.space_lineage, s.space, s.participant_lineage, s.participant, s.rights)
