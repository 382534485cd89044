"""What the runtime answers for a command or a read: an HTTP status and a JSON body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..state import Refusal


@dataclass(frozen=True)
class Outcome:
    status: int
    body: dict[str, Any]

    @classmethod
    def refusal(cls, refusal: Refusal) -> "Outcome":
        return cls(refusal.status, refusal.error())

    @classmethod
    def error(cls, status: int, type_: str, message: str) -> "Outcome":
        return cls(status, {"error": {"type": type_, "message": message}})
