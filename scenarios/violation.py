"""What a scenario check raises, and how an expected status (one status, or the set the rules allow where
the outcome depends on timing the client cannot see) is matched and shown."""
from __future__ import annotations

Expected = int | frozenset[int]


class ScenarioViolation(AssertionError):
    """An answer the rules do not allow."""


def allows(expected: Expected, status: int) -> bool:
    return status == expected if isinstance(expected, int) else status in expected


def show(expected: Expected) -> str:
    return str(expected) if isinstance(expected, int) else "one of " + "/".join(map(str, sorted(expected)))
