"""Retention: which mode is recorded for an input, and the MemoryRetained event that records it.

Mode 1 retains the source text; mode 2 also records a qualified automatic interpretation,
and only when the requested model has the automatic-memory capability (an input here: the
caller's model qualification). Otherwise the input is retained with mode 1 and the
conversation goes on as usual. The interpretation call uses the same requested model role
as the answer. Once recorded, the mode is what recovery uses: MemoryStore.apply never looks
at capabilities.

Flow for a runtime: lease row mode = recorded_mode(requested, capability); if 2, ask the
model for the interpretation; embed `embedding_text(text)`; `retention_event(...)`; journal
it; apply it. Before retaining, check `store.has_retained(lineage, operation)`: a restored
admission never repeats its memory input.
"""

from __future__ import annotations

import numpy as np

from ..journal.lease import RetentionMode
from ..state.memory_rows import MemoryKind
from ..state.vocab import Scope
from .errors import MemoryPayloadError
from .events import MemoryOp, MemoryRetained
from .ids import memory_object_id
from .payload import SourceRecord, check_text_payload, embedding_bytes


def recorded_mode(requested: int, auto_memory_capable: bool) -> RetentionMode:
    """The mode to record: 2 only when requested and the requested model has the capability."""
    if requested not in (RetentionMode.SOURCE_TEXT, RetentionMode.INTERPRETED):
        raise MemoryPayloadError(f"retention mode {requested} is not 1 or 2")
    if requested == RetentionMode.INTERPRETED and auto_memory_capable:
        return RetentionMode.INTERPRETED
    return RetentionMode.SOURCE_TEXT


def retention_event(op: MemoryOp, conversation: bytes, space: bytes, scope: Scope, actor: bytes, mode: int,
                    text: bytes, embedding: np.ndarray, interpretation: bytes | None = None) -> MemoryRetained:
    """The event retaining one input. `text` is the composed payload (payload.compose_text);
    `interpretation` is required for mode 2 and must be None for mode 1."""
    check_text_payload(text)
    if mode == RetentionMode.INTERPRETED:
        if interpretation is None:
            raise MemoryPayloadError("mode 2 needs the model's interpretation")
        check_text_payload(interpretation, "interpretation")
    elif mode == RetentionMode.SOURCE_TEXT:
        if interpretation is not None:
            raise MemoryPayloadError("mode 1 records no interpretation")
    else:
        raise MemoryPayloadError(f"retention mode {mode} is not 1 or 2")
    source = SourceRecord(conversation, op.lineage + op.operation, op.sequence, actor, int(mode)).encode()

    def oid(kind: MemoryKind) -> bytes:
        return memory_object_id(op.lineage, op.operation, kind)

    return MemoryRetained(
        op, conversation, space, int(scope), actor, int(mode), oid(MemoryKind.TEXT), oid(MemoryKind.SOURCE),
        oid(MemoryKind.EMBEDDING), oid(MemoryKind.INTERPRETATION) if mode == 2 else bytes(16), text, source,
        embedding_bytes(embedding), interpretation or b"")
