"""Every fixed bound of the shared state, in one place. Defaults are the seed's."""

from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import StateError


@dataclass(frozen=True)
class Capacities:
    participants: int = 1024
    spaces: int = 1024
    conversations: int = 4096
    members: int = 4096
    receipts: int = 1024
    command_bytes: int = 8192      # canonical command bytes per receipt
    result_bytes: int = 65536      # result bytes per receipt

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or not 1 <= value <= 0xFFFFFFFF:
                raise StateError(f"capacity {f.name} must be an integer in 1..{0xFFFFFFFF}, got {value!r}")

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))
