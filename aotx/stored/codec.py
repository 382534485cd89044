"""Stored kinds in the one codec registry (aotx.journal.registry): kind → class → transfer kind 9 STORED.

One family, stored events (aotx/stored/events.py; StoredCodecError), each journalled as a STORED
transfer of its own.

`stored_from_body` is on the replay path (one call per STORED transfer at boot): it decodes a body
through a per-kind fast path compiled once from the registry's own schema (the same leaf decoders,
but an array of bin — a `Blobs` field, e.g. a response's stream events — checked in one pass instead of
one call per element). The fast path accepts only what the registry accepts and builds the same event;
a body it does not take as it is (anything unusual, any refusal) goes to REGISTRY.decode_body, which
decides and names the refusal exactly as before.
"""

from __future__ import annotations

import typing
from typing import Any, Callable, Optional

from ..journal.fields import Refused
from ..journal.registry import REGISTRY, Family, Kind
from ..journal.transfer import TransferKind
from .errors import StoredCodecError
from .events import EVENT_CLASSES, Blobs, StoredEvent

STORED = Family("stored event", StoredCodecError)

for _cls in EVENT_CLASSES:
    REGISTRY.register(_cls, STORED, TransferKind.STORED)

_BYTES_ONLY = {bytes}


def _fast_decoder(kind: Kind) -> Callable[[dict], Optional[Any]]:
    """decode(body) -> the event, or None where the registry must decide (it then refuses or agrees)."""
    hints = typing.get_type_hints(kind.cls, include_extras=True)
    steps = tuple((leaf.key, None if hints.get(leaf.path) == Blobs else leaf.decode) for leaf in kind.schema.leaves)
    keys, version, make = kind.keys, kind.version, kind.schema.make

    def decode(body: dict) -> Optional[Any]:
        v = body.get("v")
        if v.__class__ is not int or v != version or body.keys() != keys:
            return None
        values = []
        try:
            for key, leaf_decode in steps:
                w = body[key]
                if leaf_decode is not None:
                    values.append(leaf_decode(w))
                elif w.__class__ is list and (not w or set(map(type, w)) == _BYTES_ONLY):
                    values.append(tuple(w))
                else:
                    return None
        except Refused:
            return None
        return make(values)
    return decode


_FAST = {kind.tag: _fast_decoder(kind) for kind in REGISTRY.kinds(STORED) if kind.transfer == TransferKind.STORED}


def stored_body(event: StoredEvent) -> dict[str, Any]:
    return REGISTRY.body(event)


def encode_stored(event: StoredEvent) -> bytes:
    return REGISTRY.encode(event)


def stored_from_body(body: Any) -> StoredEvent:
    """A stored event from the body of a STORED transfer; StoredCodecError refuses anything else."""
    if body.__class__ is dict:
        tag = body.get("kind")
        fast = _FAST.get(tag) if tag.__class__ is str else None
        if fast is not None:
            event = fast(body)
            if event is not None:
                return event
    return REGISTRY.decode_body(body, STORED, TransferKind.STORED)


def decode_stored(payload: bytes) -> StoredEvent:
    return REGISTRY.decode(payload, STORED, TransferKind.STORED)
