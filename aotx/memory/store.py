"""MemoryStore: memory objects, their current versions, visibility, and the recall matrix.

Driven only by memory events (`apply`), in journal order, so live state = replay of the log.
Every check of an event runs before anything changes (a bad event changes nothing).

Object graph per retained input (all owned by the conversation's space, version 1):
  source (kind 2, no source) ← text (kind 1) ← embedding (kind 3)
                                            ← interpretation (kind 4, mode 2 only)
Each derived object also records the version of its source it was made from.

Visibility of object o in space S to a reader (transitive, current versions):
  * o's owner is S, or o has instance scope and a reader is given; and
  * the reader, when given, may read o's owner space now (`Reader`: the caller's current grants ∩
    membership there — a zero-rights row blocks implicit instance access, so it blocks instance
    memory seen from any other space too); and
  * o has no source, or its source object exists, is at exactly the version o was made from,
    and is itself visible in S.
So private and room memory never leaves its own space (two private spaces of one owner share
nothing), instance memory reaches only readers of its owner space, and a revised text hides
what was derived from its old version. Without a reader only S's own memory is visible (fail
closed): every product read passes the reader's rights.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..state.decision import Refusal, conflict, not_found
from ..state.memory_rows import MemoryKind, MemoryRow, encode_memory_row, memory_row_json
from ..state.vocab import Scope
from .errors import MemoryApplyError, MemoryPayloadError
from .events import MemoryEvent, MemoryPublished, MemoryRetained, MemoryRevised
from .payload import EMBEDDING_DIM, SourceRecord, check_text_payload, embedding_from_bytes

ZERO16, ZERO32 = bytes(16), bytes(32)
MAX_LIST = 1000
Reader = Callable[[bytes], bool]    # may the reader read this owner space (32-byte space ID) now?


def _any_space(owner: bytes) -> bool:   # only for bounds over what any reader could see
    return True


@dataclass(frozen=True)
class MemoryObject:
    row: MemoryRow
    payload: bytes
    source_version: int     # version of row.source this object was made from; 0 when it has none
    order: int              # creation order in the store (list cursor)

    @property
    def id(self) -> bytes:
        return self.row.object


@dataclass(frozen=True)
class Recalled:
    """One recalled memory: the text, its source record, its embedding, score, and interpretation (mode 2)."""

    score: float
    text: MemoryObject
    source: MemoryObject
    embedding: MemoryObject
    interpretation: MemoryObject | None

    @property
    def source_record(self) -> SourceRecord:
        return SourceRecord.decode(self.source.payload)


@dataclass(frozen=True)
class MemoryRead:
    row: MemoryRow
    data: bytes             # exact payload bytes from offset
    offset: int
    next_offset: int

    def json(self) -> dict[str, Any]:
        return {"row": memory_row_json(self.row), "offset": str(self.offset), "byte_length": str(len(self.data)),
                "data": base64.b64encode(self.data).decode("ascii"), "next_offset": str(self.next_offset)}


def _room(space: bytes, scope: int) -> bytes:
    return space if scope == Scope.ROOM else ZERO32


class MemoryStore:
    def __init__(self) -> None:
        self._objects: dict[bytes, MemoryObject] = {}
        self._order: list[bytes] = []
        self._embedding_of: dict[bytes, bytes] = {}        # text object → embedding object
        self._interpretation_of: dict[bytes, bytes] = {}   # text object → interpretation object
        self._matrix = np.zeros((16, EMBEDDING_DIM), dtype=np.float32)
        self._matrix_ids: list[bytes] = []                 # matrix row → embedding object
        self._matrix_row: dict[bytes, int] = {}
        self._retained: set[tuple[bytes, bytes]] = set()   # (lineage, operation) of applied memory inputs
        self.applied = 0

    # ---------------------------------------------------------------- reads
    def __len__(self) -> int:
        return len(self._objects)

    def get(self, obj: bytes) -> MemoryObject | None:
        """The current version of an object, or None."""
        return self._objects.get(obj)

    def has_retained(self, lineage: bytes, operation: bytes) -> bool:
        """Whether this operation's memory input is already applied (a restored admission must not repeat it)."""
        return (lineage, operation) in self._retained

    def embedding_of(self, text: bytes) -> MemoryObject | None:
        e = self._embedding_of.get(text)
        return None if e is None else self._objects[e]

    def interpretation_of(self, text: bytes) -> MemoryObject | None:
        i = self._interpretation_of.get(text)
        return None if i is None else self._objects[i]

    @property
    def matrix(self) -> np.ndarray:
        """The recall matrix, float32 [n, 384], one row per embedding object (read-only view)."""
        view = self._matrix[:len(self._matrix_ids)]
        view.flags.writeable = False
        return view

    def visible(self, obj: bytes, space: bytes, reader: Reader | None = None, *,
                _seen: dict[bytes, bool] | None = None) -> bool:
        """Transitive visibility of the current version of `obj` in `space` (32-byte space ID) to
        `reader` (None: only `space`'s own memory)."""
        memo = {} if _seen is None else _seen
        if obj in memo:
            return memo[obj]
        o = self._objects.get(obj)
        ok = o is not None and (o.row.owner == space or (reader is not None and o.row.scope == Scope.INSTANCE)) \
            and (reader is None or reader(o.row.owner))
        if ok and o.row.source != ZERO16:
            parent = self._objects.get(o.row.source)
            ok = parent is not None and parent.row.version == o.source_version and \
                self.visible(o.row.source, space, reader, _seen=memo)
        memo[obj] = ok
        return ok

    def list_rows(self, space: bytes, cursor: int = 0, limit: int = 100,
                  reader: Reader | None = None) -> tuple[list[MemoryRow], int | None]:
        """Rows visible in a space to `reader`, current versions, in creation order; (rows, next cursor or None)."""
        out: list[MemoryRow] = []
        pos, limit, memo = max(cursor, 0), max(1, min(limit, MAX_LIST)), {}
        while pos < len(self._order) and len(out) < limit:
            obj = self._order[pos]
            if self.visible(obj, space, reader, _seen=memo):
                out.append(self._objects[obj].row)
            pos += 1
        return out, (pos if pos < len(self._order) else None)

    def list_json(self, space: bytes, cursor: int = 0, limit: int = 100,
                  reader: Reader | None = None) -> dict[str, Any]:
        rows, nxt = self.list_rows(space, cursor, limit, reader)
        return {"memory": [memory_row_json(r) for r in rows], "next_cursor": None if nxt is None else str(nxt)}

    def read(self, obj: bytes, space: bytes, offset: int = 0, version: int | None = None,
             reader: Reader | None = None) -> MemoryRead | Refusal:
        """One row and the exact payload bytes from `offset`, if visible in `space` to `reader` (else 404)."""
        o = self._objects.get(obj)
        if o is None or not self.visible(obj, space, reader):
            return not_found(f"memory object {obj.hex()} not found")
        if version is not None and version != o.row.version:
            return conflict(f"memory object {obj.hex()} is at version {o.row.version}, not {version}")
        if not 0 <= offset <= len(o.payload):
            return Refusal(400, "invalid_request", f"offset {offset} is outside 0..{len(o.payload)}")
        return MemoryRead(o.row, o.payload[offset:], offset, len(o.payload))

    def recall(self, space: bytes, query: np.ndarray, k: int, reader: Reader | None = None) -> list[Recalled]:
        """Top-k text memory visible in `space` to `reader` by cosine similarity to `query` (an
        L2-normalised vector).

        Order: score descending, then creation order of the embedding row (stable, deterministic).
        """
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (EMBEDDING_DIM,):
            raise MemoryPayloadError(f"a recall query is a {EMBEDDING_DIM}-vector, got shape {q.shape}")
        n = len(self._matrix_ids)
        if k <= 0 or n == 0:
            return []
        memo: dict[bytes, bool] = {}
        rows = np.array([i for i, e in enumerate(self._matrix_ids) if self.visible(e, space, reader, _seen=memo)],
                        dtype=np.int64)
        if rows.size == 0:
            return []
        scores = self._matrix[rows] @ q
        order = np.argsort(-scores, kind="stable")[:k]
        out = []
        for i in order:
            emb = self._objects[self._matrix_ids[int(rows[i])]]
            text = self._objects[emb.row.source]
            source = self._objects[text.row.source]
            interp = self.interpretation_of(text.id)
            if interp is not None and not self.visible(interp.id, space, reader, _seen=memo):
                interp = None
            out.append(Recalled(float(scores[i]), text, source, emb, interp))
        return out

    def can_recall(self, space: bytes, reader: Reader | None = None) -> bool:
        """Whether `recall` in `space` for `reader` could pick anything now, whatever the query (False:
        it answers [] for every vector)."""
        memo: dict[bytes, bool] = {}
        return any(self.visible(e, space, reader, _seen=memo) for e in self._matrix_ids)

    def visible_texts(self, space: bytes) -> list[tuple[MemoryObject, MemoryObject | None]]:
        """Every text memory recall could pick in `space` for any reader (its own memory and every
        instance memory, embedding visible), with its interpretation or None — what bounds the size
        of a rendered recall (a bound: no reader's rights are asked, nothing is shown)."""
        memo: dict[bytes, bool] = {}
        out = []
        for e in self._matrix_ids:
            if self.visible(e, space, _any_space, _seen=memo):
                text = self._objects[self._objects[e].row.source]
                interp = self.interpretation_of(text.id)
                out.append((text, interp if interp is not None and self.visible(interp.id, space, _any_space,
                                                                                   _seen=memo) else None))
        return out

    def digest(self) -> str:
        """BLAKE2b-256 over every current object (row, source version, payload) in creation order."""
        h = hashlib.blake2b(digest_size=32, person=b"aotx-memory")
        for obj in self._order:
            o = self._objects[obj]
            h.update(encode_memory_row(o.row) + o.source_version.to_bytes(8, "little")
                     + len(o.payload).to_bytes(4, "little") + o.payload)
        return h.hexdigest()

    # ---------------------------------------------------------------- apply
    def apply(self, event: MemoryEvent) -> None:
        if isinstance(event, MemoryRetained):
            self._apply_retained(event)
        elif isinstance(event, MemoryPublished):
            self._apply_published(event)
        elif isinstance(event, MemoryRevised):
            self._apply_revised(event)
        else:
            raise MemoryApplyError(f"not a memory event: {type(event).__name__}")
        self.applied += 1

    def _fresh(self, kind: str, ids: list[bytes]) -> None:
        if any(i == ZERO16 for i in ids) or len(set(ids)) != len(ids):
            raise MemoryApplyError(f"{kind}: new object IDs must be nonzero and distinct")
        for i in ids:
            if i in self._objects:
                raise MemoryApplyError(f"{kind}: object {i.hex()} already exists")

    @staticmethod
    def _payloads(kind: str, text: bytes, source: bytes, embedding: bytes) -> tuple[SourceRecord, np.ndarray]:
        try:
            check_text_payload(text)
            return SourceRecord.decode(source), embedding_from_bytes(embedding)
        except MemoryPayloadError as exc:
            raise MemoryApplyError(f"{kind}: {exc}") from None

    @staticmethod
    def _scope(kind: str, scope: int) -> Scope:
        try:
            return Scope(scope)
        except ValueError:
            raise MemoryApplyError(f"{kind}: unknown scope {scope}") from None

    def _apply_retained(self, e: MemoryRetained) -> None:
        k = e.KIND
        if (e.op.lineage, e.op.operation) in self._retained:
            raise MemoryApplyError(f"{k}: operation {e.op.operation.hex()} is already retained (no memory input twice)")
        scope = self._scope(k, e.scope)
        if e.space == ZERO32:
            raise MemoryApplyError(f"{k}: space must be a space ID")
        record, vector = self._payloads(k, e.text, e.source, e.embedding)
        if e.mode == 1:
            if e.interpretation_object != ZERO16 or e.interpretation:
                raise MemoryApplyError(f"{k}: mode 1 records no interpretation")
            ids = [e.text_object, e.source_object, e.embedding_object]
        elif e.mode == 2:
            try:
                check_text_payload(e.interpretation, "interpretation")
            except MemoryPayloadError as exc:
                raise MemoryApplyError(f"{k}: {exc}") from None
            ids = [e.text_object, e.source_object, e.embedding_object, e.interpretation_object]
        else:
            raise MemoryApplyError(f"{k}: retention mode {e.mode} is not 1 or 2")
        if (record.mode, record.actor, record.conversation) != (e.mode, e.actor, e.conversation) or \
                record.sequence != e.op.sequence or record.operation != e.op.lineage + e.op.operation:
            raise MemoryApplyError(f"{k}: source record does not describe this input")
        self._fresh(k, ids)
        room = _room(e.space, scope)

        def row(obj: bytes, kind: MemoryKind, payload: bytes, source: bytes) -> MemoryRow:
            return MemoryRow(obj, 1, kind, scope, len(payload), e.space, room, source, e.actor)

        self._add(row(e.source_object, MemoryKind.SOURCE, e.source, ZERO16), e.source, 0)
        self._add(row(e.text_object, MemoryKind.TEXT, e.text, e.source_object), e.text, 1)
        self._add(row(e.embedding_object, MemoryKind.EMBEDDING, e.embedding, e.text_object), e.embedding, 1)
        self._embedding_of[e.text_object] = e.embedding_object
        self._set_vector(e.embedding_object, vector)
        if e.mode == 2:
            self._add(row(e.interpretation_object, MemoryKind.INTERPRETATION, e.interpretation, e.text_object),
                      e.interpretation, 1)
            self._interpretation_of[e.text_object] = e.interpretation_object
        self._retained.add((e.op.lineage, e.op.operation))

    def _apply_published(self, e: MemoryPublished) -> None:
        k = e.KIND
        scope = self._scope(k, e.scope)
        if e.destination == ZERO32:
            raise MemoryApplyError(f"{k}: destination must be a space ID")
        text, source, emb = (self._objects.get(i) for i in (e.origin_text, e.origin_source, e.origin_embedding))
        if text is None or text.row.kind != MemoryKind.TEXT or text.row.version != e.origin_text_version:
            raise MemoryApplyError(f"{k}: origin text {e.origin_text.hex()} is not a text memory at version "
                                   f"{e.origin_text_version}")
        if source is None or text.row.source != e.origin_source or source.row.version != e.origin_source_version:
            raise MemoryApplyError(f"{k}: origin source does not match the text's current source")
        if emb is None or self._embedding_of.get(e.origin_text) != e.origin_embedding or \
                emb.row.version != e.origin_embedding_version:
            raise MemoryApplyError(f"{k}: origin embedding does not match the text's current embedding")
        if (e.text, e.source, e.embedding) != (text.payload, source.payload, emb.payload):
            raise MemoryApplyError(f"{k}: copied payloads differ from the originals")
        self._payloads(k, e.text, e.source, e.embedding)
        self._fresh(k, [e.text_object, e.source_object, e.embedding_object])
        room = _room(e.destination, scope)

        def row(obj: bytes, kind: MemoryKind, payload: bytes, src: bytes) -> MemoryRow:
            return MemoryRow(obj, 1, kind, scope, len(payload), e.destination, room, src, e.actor)

        self._add(row(e.source_object, MemoryKind.SOURCE, e.source, ZERO16), e.source, 0)
        self._add(row(e.text_object, MemoryKind.TEXT, e.text, e.source_object), e.text, 1)
        self._add(row(e.embedding_object, MemoryKind.EMBEDDING, e.embedding, e.text_object), e.embedding, 1)
        self._embedding_of[e.text_object] = e.embedding_object
        self._set_vector(e.embedding_object, embedding_from_bytes(e.embedding))

    def _apply_revised(self, e: MemoryRevised) -> None:
        k = e.KIND
        text, emb = self._objects.get(e.text_object), self._objects.get(e.embedding_object)
        if text is None or text.row.kind != MemoryKind.TEXT:
            raise MemoryApplyError(f"{k}: {e.text_object.hex()} is not a text memory")
        if e.text_version != text.row.version + 1:
            raise MemoryApplyError(f"{k}: text version {e.text_version} does not follow {text.row.version}")
        if emb is None or self._embedding_of.get(e.text_object) != e.embedding_object or \
                e.embedding_version != emb.row.version + 1:
            raise MemoryApplyError(f"{k}: embedding object/version does not follow the text's current embedding")
        try:
            check_text_payload(e.text)
            vector = embedding_from_bytes(e.embedding)
        except MemoryPayloadError as exc:
            raise MemoryApplyError(f"{k}: {exc}") from None
        self._replace(text, e.text_version, e.text, text.source_version)
        self._replace(emb, e.embedding_version, e.embedding, e.text_version)
        self._set_vector(e.embedding_object, vector)

    # ---------------------------------------------------------------- internals
    def _add(self, row: MemoryRow, payload: bytes, source_version: int) -> None:
        encode_memory_row(row)   # validates the row layout rules
        self._objects[row.object] = MemoryObject(row, payload, source_version, len(self._order))
        self._order.append(row.object)

    def _replace(self, old: MemoryObject, version: int, payload: bytes, source_version: int) -> None:
        r = old.row
        row = MemoryRow(r.object, version, r.kind, r.scope, len(payload), r.owner, r.room, r.source, r.actor)
        encode_memory_row(row)
        self._objects[r.object] = MemoryObject(row, payload, source_version, old.order)

    def _set_vector(self, obj: bytes, vector: np.ndarray) -> None:
        row = self._matrix_row.get(obj)
        if row is None:
            row = len(self._matrix_ids)
            if row == len(self._matrix):
                grown = np.zeros((2 * len(self._matrix), EMBEDDING_DIM), dtype=np.float32)
                grown[:row] = self._matrix
                self._matrix = grown
            self._matrix_ids.append(obj)
            self._matrix_row[obj] = row
        self._matrix[row] = vector
