"""A bounded integer or number field of a mutation's JSON body: the default where it is absent, else a
precise MalformedMutation (no bool for an int, no NaN or infinity, bounds compared exactly)."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from .errors import MalformedMutation


def bounded_int(body: Mapping[str, Any], name: str, default: Optional[int], lo: int, hi: int) -> Optional[int]:
    value = body.get(name, default)
    if value is None and default is None:
        return None
    if type(value) is not int or not lo <= value <= hi:
        raise MalformedMutation(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def bounded_number(body: Mapping[str, Any], name: str, default: Optional[float], lo: float, hi: float, *,
            open_low: bool) -> Optional[float]:
    value = body.get(name, default)
    if value is None and default is None:       # absent or null: the default, resolved later
        return None
    if type(value) not in (int, float) or (type(value) is float and not math.isfinite(value)):
        raise MalformedMutation(f"{name} must be a number, got {value!r}")
    if not lo <= value <= hi:  # compared exactly: an int too large for a float must not reach float()
        raise MalformedMutation(f"{name} must be in {'(' if open_low else '['}{lo:g}, {hi:g}]")
    value = float(value)
    if value > hi or value < lo or (open_low and value == lo):
        raise MalformedMutation(f"{name} must be in {'(' if open_low else '['}{lo:g}, {hi:g}], got {value:g}")
    return value
