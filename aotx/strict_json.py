"""Strict JSON: how every client body is read and every wire document is written.

Reading (`loads`) accepts RFC 8259 JSON only, within bounds a hostile 2 kB body cannot break:

* at most MAX_JSON_DEPTH nested arrays/objects (the top-level value counts as level 1). The depth is
  measured on the text, without recursion, before the (recursive) decoder runs: a body nested a
  thousand deep is a precise error, never a RecursionError. 64 leaves room for what clients send:
  a Chat body reaches a tool's `parameters` at level 5 and each nested object schema adds two levels,
  so OpenAI's 10 levels of schema nesting take 25;
* no `NaN`, `Infinity` or `-Infinity` literal (Python's json takes them; they are not JSON), and no
  number that overflows to an infinite float (`1e999`);
* no integer longer than Python's int-conversion bound (4300 digits).

Every refusal is a JsonInputError (a ValueError); malformed text stays a json.JSONDecodeError.
Writing (`dumps`) uses allow_nan=False: a non-finite float is a ValueError here, never a bare NaN on
the wire.
"""
from __future__ import annotations

import json
import math
import re
import sys
from itertools import accumulate
from typing import Any, Callable

MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = getattr(sys.int_info, "default_max_str_digits", 4300) or 4300

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonInputError(ValueError):
    """JSON text refused by a bound or by a literal that JSON does not have."""


def nesting_depth(text: str) -> int:
    """The deepest array/object nesting in `text`, brackets inside strings not counted (linear, no recursion).

    An unclosed container counts as open to the end, so malformed text can only read deeper."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _constant(name: str) -> Any:
    raise JsonInputError(f"{name} is not valid JSON (JSON numbers are finite: no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonInputError(f"the number {text[:40]} overflows a double (JSON numbers here must be finite)")
    return value


def decoder(object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> json.JSONDecoder:
    """A JSONDecoder that refuses non-finite numbers (use `loads` where depth is not already checked)."""
    return json.JSONDecoder(parse_constant=_constant, parse_float=_finite, object_pairs_hook=object_pairs_hook)


_PLAIN = decoder()
_HOOKED: dict[Callable, json.JSONDecoder] = {}   # one decoder per hook (the gateway's few), made once


def check_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    if text.count("[") + text.count("{") <= limit:
        return   # fewer opening brackets (strings included) than the limit: no deeper nesting possible
    depth = nesting_depth(text)
    if depth > limit:
        raise JsonInputError(f"JSON nested deeper than {limit} levels (arrays and objects)")


def loads(text: str, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """Parse strict JSON text; JsonInputError for a bound or a non-JSON literal, JSONDecodeError otherwise."""
    check_depth(text)
    dec = _PLAIN if object_pairs_hook is None else _HOOKED.get(object_pairs_hook)
    if dec is None:
        dec = _HOOKED[object_pairs_hook] = decoder(object_pairs_hook)
    try:
        return dec.decode(text)
    except ValueError as exc:
        if type(exc) is not ValueError:  # JSONDecodeError, JsonInputError, a hook's own error
            raise
        # int() of a digit string over the conversion bound
        raise JsonInputError(f"an integer in the JSON has more than {MAX_INT_DIGITS} digits") from None


# dumps(obj, separators=(",", ":")), with its encoder built once: json.dumps given any argument builds a
# JSONEncoder per call (~3 µs); the stored state's decide writes ~5 values a command on the event loop
compact: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps for the wire: UTF-8 text (no ASCII escaping) and never NaN or Infinity."""
    kwargs.setdefault("ensure_ascii", False)
    return json.dumps(obj, allow_nan=False, **kwargs)
