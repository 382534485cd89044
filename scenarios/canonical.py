"""What the runtime derives from a command, derived again on the client side: the canonical input of a
mutation (two bodies that differ only in ways the runtime canonicalises away compare equal) and the
memory objects an operation writes."""
from __future__ import annotations

import hashlib
import struct
from typing import Any, Mapping

from .vocabulary import CANCEL, CONVERSATION, INPUT, MEMBER, PUBLISH, REGISTER, RETIRE, SPACE

# memory object IDs are derived from the operation that writes them (aotx.memory.ids, DESIGN §7):
# BLAKE2b-128(person "aotx-memory-obj")(lineage 16 ‖ operation 16 ‖ u32 role); role 1 text, 2 source,
# 3 embedding, 4 interpretation. Kept here as the client-side derivation, checked against the
# runtime's by tests/scenarios.
MEMORY_ROLES = {"text": 1, "source": 2, "embedding": 3, "interpretation": 4}


def memory_object(operation: str, kind: str = "text") -> str:
    """The 32-hex memory object an operation (`op-{lineage}-{id}`) writes for `kind`."""
    _, lineage, ident = operation.split("-")
    h = hashlib.blake2b(digest_size=16, person=b"aotx-memory-obj")
    h.update(bytes.fromhex(lineage) + bytes.fromhex(ident) + struct.pack("<I", MEMORY_ROLES[kind]))
    return h.hexdigest()


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _input_canon(fields: Mapping[str, Any]) -> tuple:
    """Revision 2 (aotx.state.mutations): an absent temperature / top_p stays None (the model's default)."""
    media = tuple((m["type"], m["sha256"]) for m in fields.get("media", ()))
    return (fields["text"], fields["model"], int(fields.get("max_output_tokens", 256)),
            _opt_float(fields.get("temperature")), _opt_float(fields.get("top_p")), fields.get("pages"), media)


def legacy(canon: tuple) -> tuple:
    """An input's revision-1 canonical input (absent temperature / top_p written 0.0 / 1.0): the runtime
    also replays a retry whose revision-1 form is the stored input (aotx.state.mutations.legacy_bytes)."""
    if canon[0] != INPUT:
        return canon
    head, (temperature, top_p), tail = canon[:6], canon[6:8], canon[8:]
    return (*head, 0.0 if temperature is None else temperature, 1.0 if top_p is None else top_p, *tail)


def canonical(kind: str, fields: dict[str, Any], key: str, space: str | None = None) -> tuple:
    """The resolved input of a mutation (the operation key included, as in the runtime's canonical bytes).
    `space` is the route's resource: the space, or the conversation for inputs and cancellations."""
    if kind == REGISTER:
        return (kind, key)
    if kind == RETIRE:
        return (kind, key, int(fields["retry_floor"]))
    if kind == SPACE:
        return (kind, key, fields.get("id", key), fields.get("scope", "private"))
    if kind == CONVERSATION:
        return (kind, key, space, fields.get("id", key))
    if kind == MEMBER:
        return (kind, key, space, fields["participant"], frozenset(fields["permissions"]))
    if kind == INPUT:
        return (kind, key, space, *_input_canon(fields))
    if kind == CANCEL:
        return (kind, key, space, int(fields["target_sequence"]))
    if kind == PUBLISH:
        return (kind, key, space, fields["object"], int(fields["source_version"]))
    raise ValueError(f"unknown mutation kind {kind}")

