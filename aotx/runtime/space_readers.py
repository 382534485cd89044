"""Which readers a change of member rights in a space concerns, looked up only where someone listens.

A `member.rights_set` event concerns every reader of every conversation of its space and of every input
in them (their rights changed: each reads again, and its read rechecks them). The change feed
(aotx.runtime.targets) names only the space (`Targets.spaces`, lineage ‖ ident); who is in it is found
by the one who delivers:

* the runtime's broker asks, once per subscription, which space its operation or conversation lies in
  (`space_of`: a few dict lookups in the projection's index; a conversation never changes space, an input
  never changes conversation, so the answer is kept) and wakes the subscriptions it holds for that space —
  no table scan per event, and nothing at all when nobody reads;
* the split deployment's announcer, which cannot know the gateways' readers, names every conversation of
  the space and every input in them (`expand`, a scan of the tables), once per announcement for all the
  spaces changed since the last one rather than once per event.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..state import State
from ..state.tables import raw

OpKey = tuple[bytes, int]          # (lineage, sequence) of an operation
ConKey = bytes                     # lineage ‖ ident of a conversation (32 bytes)
SpaceKey = bytes                   # lineage ‖ ident of a space (32 bytes)
Where = Callable[[OpKey | None, ConKey | None], SpaceKey | None]


def space_of(state: State, op: OpKey | None, con: ConKey | None) -> SpaceKey | None:
    """The space (lineage ‖ ident) of conversation `con`, or of the conversation that input `op` was
    admitted to; None where that is not (or not yet, or no longer) in the state."""
    if con is None:
        if op is None:
            return None
        slot = state.receipt_slot(op[0], op[1])
        if slot is None:
            return None
        r = state.receipts[slot]
        con = raw(r["resource_lineage"]) + raw(r["resource_ident"])
    row = state.conversation_row(con[:16], con[16:])
    if row is None:
        return None
    space = state.spaces[int(state.conversations[row]["space"])]
    return raw(space["lineage"]) + raw(space["ident"])


def where(state: Callable[[], State]) -> Where:
    """`space_of` against the state as it is when asked."""
    return lambda op, con: space_of(state(), op, con)


def expand(state: State, spaces: Iterable[SpaceKey]) -> tuple[set[ConKey], set[OpKey], bool]:
    """Every conversation of `spaces` and every input in them: (conversations, operations, unknown), where
    `unknown` says a space is not in the state (the caller then tells every reader)."""
    rows, unknown = [], False
    for key in spaces:
        row = state.space_row(key[:16], key[16:])
        if row is None:   # an applied event's space exists; be safe anyway
            unknown = True
        else:
            rows.append(row)
    cons: set[ConKey] = set()
    ops: set[OpKey] = set()
    if not rows or not state.n_conversations:
        return cons, ops, unknown
    convs = state.conversations[:state.n_conversations]
    cons = {raw(c["lineage"]) + raw(c["ident"]) for c in convs[np.nonzero(np.isin(convs["space"], rows))[0]]}
    if cons:
        receipts = state.receipts
        for slot, record in enumerate(state.executions):
            if record is not None:
                r = receipts[slot]
                if raw(r["resource_lineage"]) + raw(r["resource_ident"]) in cons:
                    ops.add((raw(r["lineage"]), int(r["sequence"])))
    return cons, ops, unknown
