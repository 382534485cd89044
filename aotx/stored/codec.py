"""Stored kinds in the one codec registry (aotx.journal.registry): kind → class → transfer kind 9 STORED.

One family, stored events (aotx/stored/events.py; StoredCodecError), each journalled as a STORED
transfer of its own.
"""

from __future__ import annotations

from typing import Any

from ..journal.registry import REGISTRY, Family
from ..journal.transfer import TransferKind
from .errors import StoredCodecError
from .events import EVENT_CLASSES, StoredEvent

STORED = Family("stored event", StoredCodecError)

for _cls in EVENT_CLASSES:
    REGISTRY.register(_cls, STORED, TransferKind.STORED)


def stored_body(event: StoredEvent) -> dict[str, Any]:
    return REGISTRY.body(event)


def encode_stored(event: StoredEvent) -> bytes:
    return REGISTRY.encode(event)


def stored_from_body(body: Any) -> StoredEvent:
    """A stored event from the body of a STORED transfer; StoredCodecError refuses anything else."""
    return REGISTRY.decode_body(body, STORED, TransferKind.STORED)


def decode_stored(payload: bytes) -> StoredEvent:
    return REGISTRY.decode(payload, STORED, TransferKind.STORED)
