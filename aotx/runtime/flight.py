"""A round's flight (one lineage's ticks on its subject) and a subject left unsynced (aotx.runtime.writer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from ..journal import Tick
from ..state.mutations import Mutation
from .observers import NO_MUTATIONS
from .outcome import Outcome


@dataclass
class Unsynced:
    """A subject's ticks whose landing is unknown (no ack) or partial."""

    subject: str
    lineage_hash: int
    ticks: list[Tick]


@dataclass(eq=False)
class Flight:
    """One lineage's ticks of a round, appended in order on its subject. `continuation`: the ticks
    complete a transfer already partial in the log (a read-back's resend): none is a first tick."""

    subject: str
    lh: int
    ticks: list[Tick]
    landed: list[tuple[int, Tick]] = field(default_factory=list)   # (stream sequence, tick), acked
    error: Optional[Outcome] = None
    conflict: bool = False
    continuation: bool = False
    gap: bool = False   # the log may hold a message of this subject, after `landed`, that was never acked to us
    lineage: bytes = b""
    base: Optional[int] = None   # the guard of its first tick, fixed when it was decided (else read when sent)
    early: Optional[Callable[[int], None]] = None   # told a tick's index once applied early (aotx.runtime.early_apply)
    mutations: Mapping[tuple[bytes, int], Mutation] = field(default_factory=lambda: NO_MUTATIONS)   # for observers

    @property
    def partial(self) -> bool:
        """Would a refusal now leave part of a transfer in the log?"""
        return bool(self.landed) or self.continuation

    @property
    def rest(self) -> list[Tick]:
        return self.ticks[len(self.landed):]
