"""Opaque wire identifiers with the prefixes the real APIs use."""
from __future__ import annotations

import hashlib
import secrets


def new_id(prefix: str, nbytes: int = 12) -> str:
    """e.g. new_id("chatcmpl-"), new_id("msg_"), new_id("call_")."""
    return prefix + secrets.token_hex(nbytes)


def system_fingerprint(model_id: str) -> str:
    """Stable per model build: pairs with `seed` for best-effort determinism."""
    return "fp_" + hashlib.sha256(model_id.encode()).hexdigest()[:10]
