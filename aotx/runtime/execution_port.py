"""What the executor may ask of the runtime: a narrow port, never the runtime object itself.

* `ExecutionJournal`: journal these execution events (lease, memory, output, completion) on a
  lineage; the answer comes once they are saved (None) or refused (an Outcome: 429 on a journal
  hold, 503 when the runtime stopped); and wait until a hold lifts.
* `ProjectionReads`: read access to the acknowledged state and memory store.

The executor hears of saved admissions and cancellations as an observer of applied journal
messages (aotx.runtime.observers), which it registers itself; nothing calls into it per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from ..memory import MemoryStore
from ..state import ExecutionContext, Grants, State
from .outcome import Outcome


class ExecutionJournal(Protocol):
    async def journal(self, lineage: bytes, events: Sequence[Any]) -> Outcome | None:
        """Append the events on the lineage's subject and apply them once acknowledged; None when
        every one landed, else the refusal."""
        ...

    async def writable(self) -> bool:
        """Return once no journal hold is left; False when the runtime stopped for good."""
        ...


class ProjectionReads(Protocol):
    @property
    def state(self) -> State: ...

    @property
    def memory(self) -> MemoryStore: ...


@dataclass(frozen=True)
class ExecutionSettings:
    """What the deployment decided for execution (the runtime validated it)."""

    context: Optional[ExecutionContext]   # the models and page grant offered (None: inputs are refused)
    deadline: float                       # seconds from the applied lease to the end of the input
    retention_mode: int = 1               # asked for; the recorded mode is 2 only where the model qualifies
    lease_revision: int = 3
    result_bytes: int = 65536             # result bytes per receipt
    author_grants: Callable[[bytes], Grants] = lambda lineage: Grants.all()   # an author's current grants
