"""Read access to the acknowledged projection: the state and the memory store a boot built and
every applied journal message advanced (the executor's ProjectionReads; the runtime's reads)."""

from __future__ import annotations

from typing import Callable

from ..memory import MemoryStore
from ..state import State
from ..projection import Projector


class ProjectionView:
    def __init__(self, projector: Callable[[], Projector | None]) -> None:
        self._projector = projector

    def _current(self) -> Projector:
        proj = self._projector()
        if proj is None:
            raise RuntimeError("shared runtime not started")
        return proj

    @property
    def state(self) -> State:
        return self._current().state

    @property
    def memory(self) -> MemoryStore:
        return self._current().memory
