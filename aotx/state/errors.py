"""State-core errors. Each one says exactly what is wrong; none is a refusal to a client.

Refusals to a client are values (`Refusal` in decision.py), not exceptions. These exceptions
mean malformed input at the edge (400) or an inconsistent log met by `apply` (fail closed).
"""

from __future__ import annotations


class StateError(ValueError):
    """Base of every state-core error."""


class IdError(StateError):
    """A resource ID, lineage or operation key is malformed."""


class MalformedMutation(StateError):
    """A mutation body is not a canonical, complete mutation of its kind (HTTP 400)."""


class CapacityFull(StateError):
    """A fixed-capacity table has no free row. `table` names it."""

    def __init__(self, table: str, capacity: int) -> None:
        super().__init__(f"{table} table is full ({capacity} rows)")
        self.table, self.capacity = table, capacity


class ApplyError(StateError):
    """An event does not fit the state it is applied to (wrong version, missing row, ...)."""


class EventCodecError(StateError):
    """An event body could not be decoded: unknown kind or version, missing or extra field, bad type."""


class MemoryRowError(StateError):
    """A 128-byte memory metadata row (or its JSON form) is malformed."""
