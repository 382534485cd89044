"""Memory object IDs, derived from the operation that writes them (so replay derives the same IDs).

object = BLAKE2b-128(person=b"aotx-memory-obj")(lineage 16 ‖ operation 16 ‖ u32 role)
with role = the object's MemoryKind code (1 text, 2 source, 3 embedding, 4 interpretation).
"""

from __future__ import annotations

import hashlib
import struct

from ..state.memory_rows import MemoryKind

_PERSON = b"aotx-memory-obj"


def memory_object_id(lineage: bytes, operation: bytes, role: MemoryKind) -> bytes:
    if len(lineage) != 16 or len(operation) != 16:
        raise ValueError("lineage and operation are 16 bytes each")
    h = hashlib.blake2b(digest_size=16, person=_PERSON)
    h.update(lineage + operation + struct.pack("<I", int(role)))
    return h.digest()
