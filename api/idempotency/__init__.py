"""Idempotency-Key on the four model surfaces (issue 11 part 5), on the stored core's key records.

`@idempotent(surface)` wraps a route (wrap); the route calls `await admit_key(body, stream=...)` once
its input is checked (gate). header: the key and the body digest; saver: the answer saved as it goes;
replay: answers to a repeat.
"""
from api.idempotency.gate import admit_key
from api.idempotency.header import HEADER, REPLAYED
from api.idempotency.wrap import idempotent

__all__ = ["HEADER", "REPLAYED", "admit_key", "idempotent"]
