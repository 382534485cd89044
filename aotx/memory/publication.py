"""Publication: copy a retained text memory, its source and its embedding into another space.

`decide_publication` checks, in this order (nothing changes on a refusal):
  * the actor's current grants ∩ membership: the destination must be readable (else 404) and
    manageable (else 403); the object's own space must be readable by the actor (else 404);
  * the object exists and is visible in its space (else 404);
  * `source_version` is the object's current version (else 409 conflict);
  * the object is a text memory (kind 1) with a source and an embedding (else 409
    unsupported_kind: sources, embeddings and interpretations are not publishable);
  * the destination is not the object's own space (else 409 conflict).
The accepted MemoryPublished event is the complete publication with its provenance; applying
it creates three distinct objects in the destination, with the destination's scope, the
publisher as actor and fresh source links; the originals keep their scope.
"""

from __future__ import annotations

from ..state.decision import Refusal, conflict, forbidden, not_found
from ..state.derive import lineage_for
from ..state.errors import IdError
from ..state.ids import IdKind, format_id, parse_id
from ..state.memory_rows import MemoryKind
from ..state.rights import Actor, effective_rights, space_reader
from ..state.state import State
from ..state.vocab import Rights, Scope
from .events import MemoryOp, MemoryPublished
from .ids import memory_object_id
from .store import MemoryStore


def unsupported_kind(kind: MemoryKind) -> Refusal:
    return Refusal(409, "unsupported_kind", f"a {kind.name.lower()} memory cannot be published; "
                                             "only retained text memory can")


def decide_publication(store: MemoryStore, state: State, actor: Actor, op: MemoryOp, destination: str,
                       obj: bytes, source_version: int) -> MemoryPublished | Refusal:
    if not actor.grants.shared_read:
        return forbidden("reads need the shared_read grant")
    try:
        dest = parse_id(destination, IdKind.SPACE)
    except IdError as exc:
        return Refusal(400, "invalid_request", str(exc))
    prow = state.participant_row(lineage_for(actor.principal))
    drow = state.space_row(dest.lineage, dest.ident)
    rights = Rights.NONE if drow is None else effective_rights(state, drow, prow, actor.grants)
    if drow is None or not rights & Rights.READ:
        return not_found(f"space {destination} not found")
    if not rights & Rights.MANAGE:
        return forbidden(f"publishing into {destination} needs manage rights there")
    text = store.get(obj)
    missing = not_found(f"memory object {obj.hex()} not found")
    if text is None:
        return missing
    owner = text.row.owner
    orow = state.space_row(owner[:16], owner[16:])
    if orow is None or not effective_rights(state, orow, prow, actor.grants) & Rights.READ:
        return missing
    if not store.visible(obj, owner, space_reader(state, prow, actor.grants)):
        return missing
    if source_version != text.row.version:
        return conflict(f"memory object {obj.hex()} is at version {text.row.version}, not {source_version}")
    if text.row.kind != MemoryKind.TEXT:
        return unsupported_kind(MemoryKind(text.row.kind))
    source, emb = store.get(text.row.source), store.embedding_of(obj)
    if source is None or emb is None:
        return unsupported_kind(MemoryKind(text.row.kind))
    dest_raw = dest.lineage + dest.ident
    if dest_raw == owner:
        return conflict(f"memory object {obj.hex()} already belongs to {format_id(IdKind.SPACE, owner[:16], owner[16:])}")

    def oid(kind: MemoryKind) -> bytes:
        return memory_object_id(op.lineage, op.operation, kind)

    return MemoryPublished(
        op, lineage_for(actor.principal), dest_raw, int(Scope(int(state.spaces[drow]["scope"]))),
        obj, text.row.version, source.id, source.row.version, emb.id, emb.row.version,
        oid(MemoryKind.TEXT), oid(MemoryKind.SOURCE), oid(MemoryKind.EMBEDDING),
        text.payload, source.payload, emb.payload)
