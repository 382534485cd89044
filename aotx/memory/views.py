"""Memory reads (GET /spaces/{space}/memory, GET /memory/{object}): rights first, then visibility.

Both recheck the reader's current grants ∩ membership (as every shared read does): a space
the reader cannot read answers 404, whatever it holds. A list shows the space's own memory and
the instance memory of spaces the reader may read now (a zero-rights row in an instance space
hides its memory everywhere). An object is read in its owner space: it must be visible there
(transitive visibility, current versions) and that space readable by the reader; otherwise 404,
so a read reveals nothing of memory the reader may not see. A reader without the shared_read
grant gets the same 403 for every object ID, checked before the object is looked up.
"""

from __future__ import annotations

from typing import Any

from ..state.decision import Refusal, not_found
from ..state.derive import lineage_for
from ..state.errors import IdError
from ..state.ids import IdKind, format_id, parse_hex16, parse_id
from ..state.queries import read_grant_refusal, readable_space
from ..state.rights import Actor, space_reader
from ..state.state import State
from .store import MemoryStore, Reader


def reader_of(state: State, actor: Actor) -> Reader:
    """The actor's read rights on spaces now (current grants ∩ membership), for one read."""
    return space_reader(state, state.participant_row(lineage_for(actor.principal)), actor.grants)


def list_memory(state: State, store: MemoryStore, actor: Actor, space: str, cursor: int = 0,
                limit: int = 100) -> dict[str, Any] | Refusal:
    found = readable_space(state, actor, space)
    if isinstance(found, Refusal):
        return found
    rid = parse_id(space, IdKind.SPACE)
    return store.list_json(rid.lineage + rid.ident, cursor, limit, reader_of(state, actor))


def memory_object(state: State, store: MemoryStore, actor: Actor, obj: str, offset: int = 0) -> dict[str, Any] | Refusal:
    if (refusal := read_grant_refusal(actor)) is not None:   # before the lookup: 403 for every object alike
        return refusal
    try:
        key = parse_hex16(obj, "object")
    except IdError as exc:
        return Refusal(400, "invalid_request", str(exc))
    o = store.get(key)
    if o is None:
        return not_found(f"memory object {obj} not found")
    owner = o.row.owner
    found = readable_space(state, actor, format_id(IdKind.SPACE, owner[:16], owner[16:]))
    if isinstance(found, Refusal):
        return not_found(f"memory object {obj} not found") if found.status == 404 else found
    read = store.read(key, owner, offset, reader=reader_of(state, actor))
    return read if isinstance(read, Refusal) else read.json()
