"""Memory kinds in the one codec registry (aotx.journal.registry): kind → class → transfer kind.

One family, memory events (aotx/memory/events.py; MemoryCodecError). `memory.retained` is a
MEMORY transfer of its own; `memory.published` travels inside the `memory.publication` state
event (its `memory` bytes); `memory.revised` has no transfer kind yet. The functions below are
the names callers have always used; each is one call into the registry.
"""

from __future__ import annotations

from typing import Any

from ..journal.registry import REGISTRY, Family
from ..journal.transfer import TransferKind
from .errors import MemoryCodecError
from .events import MemoryEvent, MemoryPublished, MemoryRetained, MemoryRevised

MEMORY = Family("memory event", MemoryCodecError)

REGISTRY.register(MemoryRetained, MEMORY, TransferKind.MEMORY)
REGISTRY.register(MemoryPublished, MEMORY)
REGISTRY.register(MemoryRevised, MEMORY)


def memory_event_body(event: MemoryEvent) -> dict[str, Any]:
    return REGISTRY.body(event)


def encode_memory_event(event: MemoryEvent) -> bytes:
    return REGISTRY.encode(event)


def memory_event_from_body(body: Any) -> MemoryEvent:
    return REGISTRY.decode_body(body, MEMORY)


def decode_memory_event(payload: bytes) -> MemoryEvent:
    return REGISTRY.decode(payload, MEMORY)
