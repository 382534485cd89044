"""The Idempotency-Key request header and what makes two requests "the same".

The key is read as Stripe sends it (a bare token) or as the IETF draft writes it (a Structured
Field string: `"..."`, with `\\"` and `\\\\` escapes); either way it must be 1..255 printable ASCII
characters (aotx.stored.ids.is_key), sent once. Anything else is a 400 that names the header.

Two requests are the same when their bodies are the same JSON value: the digest is the sha256 of
the body re-serialised with sorted keys and no insignificant whitespace (UTF-8, no escaping). Key
order, whitespace and string escapes do not matter; every parameter does, numbers as written
(`1` and `1.0` differ), and so does the surface and the caller's identity (a key is scoped to both).
Headers do not enter the digest.
"""
from __future__ import annotations

import hashlib
from typing import Optional

from quart import request

from aotx import strict_json
from aotx.stored.ids import MAX_KEY, is_key
from api.errors import ApiError

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"     # "true" on every answer that is not the first attempt's own run


def _bad(message: str) -> ApiError:
    return ApiError(400, message, param=HEADER, code="invalid_idempotency_key")


def _unquote(value: str) -> str:
    """A Structured Field string's content (RFC 8941 §3.3.3); a bare token as it is."""
    if not value.startswith('"'):
        return value
    if len(value) < 2 or not value.endswith('"'):
        raise _bad(f"'{HEADER}' is a malformed quoted string (no closing quote)")
    out, chars = [], iter(value[1:-1])
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt not in ('"', "\\"):
                raise _bad(f"'{HEADER}' is a malformed quoted string (only \\\" and \\\\ may be escaped)")
            out.append(nxt)
        elif ch == '"':
            raise _bad(f"'{HEADER}' is a malformed quoted string (an unescaped quote inside)")
        else:
            out.append(ch)
    return "".join(out)


def presented_key() -> Optional[str]:
    """The request's idempotency key, None when it sends none; an ApiError (400) when it is malformed."""
    values = request.headers.getlist(HEADER)
    if not values:
        return None
    if len(values) > 1:
        raise _bad(f"'{HEADER}' must be sent once")
    key = _unquote(values[0].strip())
    if not is_key(key):
        raise _bad(f"'{HEADER}' must be 1..{MAX_KEY} printable ASCII characters")
    return key


def body_digest(body: dict) -> bytes:
    """sha256 of the canonical form of a parsed request body (sorted keys, compact, UTF-8)."""
    canonical = strict_json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).digest()
