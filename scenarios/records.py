"""What the rule model keeps: participants with their unretired receipts, spaces, inputs and what the client
has seen of them, and the text memory the client knows exists."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .canonical import memory_object
from .vocabulary import QUEUED


@dataclass
class Receipt:
    sequence: int
    key: str
    canon: tuple
    body: dict[str, Any] | None = None   # the receipt JSON as first acknowledged (an input's: its latest seen)


@dataclass
class Participant:
    name: str
    registered: bool = False
    pid: str | None = None
    next: int = 1
    floor: int = 1
    receipts: dict[int, Receipt] = field(default_factory=dict)     # unretired, by sequence
    retired_ops: set[str] = field(default_factory=set)

    def key_in_use(self, key: str) -> bool:
        return any(r.key == key for r in self.receipts.values())


@dataclass
class Space:
    sid: str
    owner: str
    scope: str
    members: dict[str, frozenset] = field(default_factory=dict)


@dataclass
class Input:
    """An admitted input and what the client has seen of it."""

    op: str
    actor: str
    seq: int
    con: str
    space: str
    text: str
    epoch: int                       # runtime epoch it was admitted in (a restart may interrupt it)
    execution: str = QUEUED          # the latest execution state seen
    cancel_requested: bool = False   # a cancellation of it was admitted (201)
    retired: bool = False
    ended: bool = False              # known to have ended (seen terminal, or a retirement above it was admitted)

    @property
    def text_object(self) -> str:
        return memory_object(self.op, "text")


@dataclass
class Memory:
    """A text memory object known to exist (its source and embedding come with it)."""

    obj: str
    owner: str          # the owning space
    version: int = 1
    origin: str = ""    # the operation that wrote it (an input, or a publication)
    text: str = ""

