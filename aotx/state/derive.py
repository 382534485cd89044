"""Deterministic values the runtime assigns: lineages of principals and operation IDs.

An operation ID's 16 bytes are `u64 sequence (big-endian) || BLAKE2b-64(lineage, sequence, key)`:
unique per (lineage, sequence) forever, so a retired handle can never select a newer receipt
that reuses its slot or its key, and a handle tells its sequence (a retired one answers 410).
"""

from __future__ import annotations

import functools
import hashlib
import struct

_LINEAGE_PERSON = b"aotx-lineage"
_OPERATION_PERSON = b"aotx-operation"


@functools.lru_cache(maxsize=8192)
def lineage_for(principal: str) -> bytes:
    """The lineage of a principal: BLAKE2b-128 of its UTF-8 name."""
    return hashlib.blake2b(principal.encode("utf-8"), digest_size=16, person=_LINEAGE_PERSON).digest()


_OPERATION_HASH = hashlib.blake2b(digest_size=8, person=_OPERATION_PERSON)   # copied per ID: no parameter parsing
_pack_u64 = struct.Struct(">Q").pack


def operation_id(lineage: bytes, sequence: int, operation_key: bytes) -> bytes:
    seq = _pack_u64(sequence)
    h = _OPERATION_HASH.copy()
    h.update(lineage + seq + operation_key)
    return seq + h.digest()


def operation_sequence(operation: bytes) -> int:
    """The sequence an operation ID was assigned to."""
    return struct.unpack(">Q", operation[:8])[0]
