"""Building memory events without running the embedding model: deterministic unit vectors."""

from __future__ import annotations

import hashlib

import numpy as np

from aotx.memory import MemoryOp, compose_text, retention_event
from aotx.state import Scope, lineage_for


def unit(*weights: tuple[int, float]) -> np.ndarray:
    """A unit 384-vector with the given (axis, weight) components."""
    v = np.zeros(384, dtype=np.float32)
    for axis, w in weights:
        v[axis] = w
    return (v / np.linalg.norm(v)).astype(np.float32)


def space_id(principal: str, ident: int) -> bytes:
    return lineage_for(principal) + ident.to_bytes(16, "big")


def conversation_id(principal: str, ident: int) -> bytes:
    return lineage_for(principal) + (0xC0 << 120 | ident).to_bytes(16, "big")


def op(principal: str, sequence: int) -> MemoryOp:
    operation = sequence.to_bytes(8, "big") + hashlib.blake2b(f"{principal}{sequence}".encode(), digest_size=8).digest()
    return MemoryOp(lineage_for(principal), sequence, operation)


def retained(principal: str, sequence: int, space: bytes, scope: Scope, text: str, vector: np.ndarray,
             interpretation: str | None = None, conversation: bytes | None = None):
    return retention_event(op(principal, sequence), conversation or conversation_id(principal, 1), space, scope,
                           lineage_for(principal), 2 if interpretation is not None else 1, compose_text(text), vector,
                           None if interpretation is None else interpretation.encode())
