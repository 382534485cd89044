"""Strict typed reads from a JSON request body; each failure names its `param`.

Unknown keys are ignored (the SDKs pass `extra_body` keys verbatim); known keys
are checked strictly: a bool is never an integer or a number.
"""
from __future__ import annotations

import json

from aotx import strict_json
from api.errors import ApiError

_MISSING = object()
# One cap on every surface that takes stop sequences (Chat `stop`, Completions `stop`, Messages
# `stop_sequences`): OpenAI's documented 4. Responses has no stop parameter.
MAX_STOP_SEQUENCES = 4


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param)


def parse_json_object(raw: bytes) -> dict:
    """A strict JSON object (aotx.strict_json: depth bound, no NaN/Infinity) from the raw body."""
    try:
        body = strict_json.loads(raw.decode(json.detect_encoding(raw)))
    except strict_json.JsonInputError as exc:
        raise ApiError(400, f"The request body is refused: {exc}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def required_str(body: dict, key: str) -> str:
    value = body.get(key, _MISSING)
    if value is _MISSING or value is None:
        raise bad(key, f"Missing required parameter: '{key}'.")
    if not isinstance(value, str):
        raise bad(key, f"'{key}' must be a string.")
    return value


def opt_str(body: dict, key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise bad(key, f"'{key}' must be a string.")
    return value


def opt_bool(body: dict, key: str, default: bool = False) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(key, f"'{key}' must be a boolean.")
    return value


def opt_int(body: dict, key: str, default: int | None, lo: int | None = None,
            hi: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if not is_int(value):
        raise bad(key, f"'{key}' must be an integer.")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise bad(key, f"'{key}' must be {span}; got {value}.")
    return value


def opt_number(body: dict, key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if not is_number(value):
        raise bad(key, f"'{key}' must be a number.")
    if not lo <= value <= hi:
        raise bad(key, f"'{key}' must be between {lo} and {hi}; got {value}.")
    return float(value)


def opt_object(body: dict, key: str) -> dict | None:
    value = body.get(key)
    if value is not None and not isinstance(value, dict):
        raise bad(key, f"'{key}' must be an object.")
    return value


def opt_list(body: dict, key: str) -> list | None:
    value = body.get(key)
    if value is not None and not isinstance(value, list):
        raise bad(key, f"'{key}' must be an array.")
    return value


def stop_strings(body: dict, key: str, limit: int = MAX_STOP_SEQUENCES) -> tuple[str, ...]:
    """`stop` / `stop_sequences`: a string or a list of at most `limit` strings."""
    value = body.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise bad(key, f"'{key}' must be a string or an array of strings.")
    if len(value) > limit:
        raise bad(key, f"'{key}' may hold at most {limit} sequences; got {len(value)}.")
    return tuple(s for s in value if s)


def sampling_numbers(body: dict, service, temperature_max: float = 2.0) -> tuple[float, float]:
    """`temperature`, `top_p`; each one absent (or null) takes the served model's default
    (aotx.sampling_defaults, service.sampling_defaults)."""
    d = service.sampling_defaults
    return (opt_number(body, "temperature", min(d.temperature, temperature_max), 0.0, temperature_max),
            opt_number(body, "top_p", d.top_p, 0.0, 1.0))


def known_model(body: dict, service) -> str:
    """`model` is required and must name the served model (unknown -> 404 model_not_found)."""
    from api.errors import model_not_found

    name = required_str(body, "model")
    if not service.known_model(name):
        raise model_not_found(name)
    return name
