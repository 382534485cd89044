"""aotx.memory: retained memory of shared conversations (DESIGN §7), pure and event-driven.

Payload byte formats (`payload`), memory events (`events`) and their kinds in the one codec registry (`codec`), the store with
transitive visibility, current versions and the recall matrix (`store`), retention mode
selection (`retention`), publication decisions (`publication`) and prompt rendering by
lease revision (`render`). Embeddings come from `kernels.embedding` (the runtime runs the
model and records the vectors in the events; this package never runs a model).
"""

from .errors import MemoryApplyError, MemoryCodecError, MemoryPayloadError
from .codec import decode_memory_event, encode_memory_event, memory_event_body, memory_event_from_body
from .events import MemoryEvent, MemoryOp, MemoryPublished, MemoryRetained, MemoryRevised
from .ids import memory_object_id
from .payload import (EMBEDDING_BYTES, EMBEDDING_DIM, LINK_BYTES, MAX_MEDIA, MEDIA_TYPES, TEXT_LIMIT, MediaRef,
                      SourceRecord, check_text_payload, compose_text, embedding_bytes, embedding_from_bytes,
                      embedding_text, media_link)
from .publication import decide_publication, unsupported_kind
from .render import CONTEXT_LIMIT, HEADER, HISTORICAL_DATA_RULE, RenderedMemory, compact, render_memory
from .retention import recorded_mode, retention_event
from .store import MemoryObject, MemoryRead, MemoryStore, Recalled

__all__ = [
    "CONTEXT_LIMIT", "EMBEDDING_BYTES", "EMBEDDING_DIM", "HEADER", "HISTORICAL_DATA_RULE", "LINK_BYTES",
    "MAX_MEDIA", "MEDIA_TYPES", "MediaRef", "MemoryApplyError", "MemoryCodecError", "MemoryEvent", "MemoryObject",
    "MemoryOp", "MemoryPayloadError", "MemoryPublished", "MemoryRead", "MemoryRetained", "MemoryRevised",
    "MemoryStore", "Recalled", "RenderedMemory", "SourceRecord", "TEXT_LIMIT", "check_text_payload", "compact",
    "compose_text", "decide_publication", "decode_memory_event", "embedding_bytes", "embedding_from_bytes",
    "embedding_text", "encode_memory_event", "media_link", "memory_event_body", "memory_event_from_body",
    "memory_object_id", "recorded_mode", "render_memory", "retention_event", "unsupported_kind",
]
