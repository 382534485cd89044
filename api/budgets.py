"""Output budgets, the same on every route.

omitted / null -> the server default (also on Anthropic, whose upstream API
requires max_tokens: a documented quirk of this server); 0 -> zero decode
tokens; negative or non-integer -> 400 naming the client's own field.
"""
from __future__ import annotations

from api.errors import ApiError
from api.fields import is_int


def _field(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not is_int(value):
        raise ApiError(400, f"'{key}' must be an integer; got {value!r}.", param=key)
    if value < 0:
        raise ApiError(400, f"'{key}' must be non-negative; got {value}.", param=key)
    return value


def decode_budget(body: dict, key: str, default: int) -> int:
    """The budget in `body[key]`, or `default` when omitted or null."""
    value = _field(body, key)
    return default if value is None else value


def chat_budget(body: dict, default: int) -> int:
    """Chat takes `max_tokens` (deprecated) and `max_completion_tokens`; both -> the smaller."""
    values = [v for v in (_field(body, "max_tokens"), _field(body, "max_completion_tokens"))
              if v is not None]
    return min(values) if values else default
