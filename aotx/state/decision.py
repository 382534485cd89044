"""Commands and decisions: what `decide` takes and what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

from .events import Event
from .mutations import Mutation
from .rights import Actor


@dataclass(frozen=True)
class ModelCaps:
    """A model the runtime can execute inputs with: its weights digest and capabilities."""

    digest: bytes            # sha256 of the weights file, 32 bytes
    media: bool = False      # accepts image/audio feature inputs
    automatic_memory: bool = False
    context_tokens: int = 0  # its context window (prompt + output tokens); 0: not stated, not checked


@dataclass(frozen=True)
class ExecutionContext:
    """What an input's admission is decided against: the executable models and the page grant
    (the default and the maximum KV page limit of one input). None: this runtime runs no inputs."""

    models: Mapping[str, ModelCaps]
    page_grant: int


@dataclass(frozen=True)
class Command:
    """A validated mutation plus the context it is decided in: who sends it, with which current
    grants, and (for inputs) which models and page grant the runtime offers."""

    actor: Actor
    mutation: Mutation
    context: Optional[ExecutionContext] = None
    # decides a publication's memory part against the memory store (aotx.memory, which this package
    # does not import): (state, actor, header, mutation) -> encoded publication bytes or a Refusal.
    # None: this runtime keeps no memory, and publications are refused.
    publisher: Optional[Callable[..., Any]] = None


@dataclass(frozen=True)
class Accepted:
    """A new operation: append `events`; once the log acks them, `apply` makes the receipt. Status 201."""

    events: tuple[Event, ...]
    operation: str
    status: int = 201


@dataclass(frozen=True)
class Replayed:
    """An exact retry: answer the existing receipt in `slot` with status 200; nothing is appended."""

    operation: str
    slot: int
    status: int = 200


@dataclass(frozen=True)
class Refusal:
    """Nothing changes. `type` is the error envelope's type; `table` names a full table."""

    status: int
    type: str
    message: str
    table: Optional[str] = None

    def error(self) -> dict:
        return {"error": {"type": self.type, "message": self.message}}


Decision = Union[Accepted, Replayed, Refusal]


def conflict(message: str) -> Refusal:
    return Refusal(409, "conflict", message)


def not_found(message: str) -> Refusal:
    return Refusal(404, "not_found", message)


def forbidden(message: str) -> Refusal:
    return Refusal(403, "forbidden", message)


def gone(message: str) -> Refusal:
    return Refusal(410, "gone", message)


def table_full(table: str, capacity: int) -> Refusal:
    return Refusal(507, "capacity", f"{table} table is full ({capacity} rows)", table=table)
