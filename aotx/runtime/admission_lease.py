"""Admission and lease in one append: what a command round asks the executor for an input it admits.

An input's chain used to be four fsynced appends: its admission, then — once the executor heard of
the saved admission and its group came up — its lease, then output and completion. Where the
execution queue would lease the input at once (nothing queued ahead of it, and the engine grants
its page bound now), the command round journals its lease right behind its admission, on the same
lineage, in the same flight: the same tick (journal message) where both fit in 16 records, else the
next tick of the same flight — the same atomic batch where the round goes as one.

Why the rule "execution starts only after a saved admission" still holds: the lease is decided
from what the admission records (its page limit, its conversation's space in the acknowledged
state, the acknowledged memory store — unchanged until the round is applied, since every write
takes the writer's lock; a round that publishes memory pre-leases nothing) and from the executor's
own queue and claims, exactly what it would read once the admission is applied. Nothing runs
before the tick holding the lease is acknowledged and applied: the executor begins the input when
it observes the applied LEASE, after the ADMISSION before it. A lease can never be in the log
without its admission: the lease follows the admission on the lineage's subject, each tick
expecting the previous one's sequence (same message, same batch, or a later tick that can only
land after it), and replay applies them in stream order. An admission whose lease did not land
(a refused later tick) is queued as usual; one whose landing is unknown is released and, if a
read-back finds it, queued (or run, if its lease landed too) as any admission the executor hears of.

The boundary: the command round (aotx.runtime.command_round) asks through this narrow port, once
per admitted input, and tells the port when the round's write is settled; the executor
(aotx.runtime.executor) implements it. The planner stays pure: it never sees the lease.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from ..state import InputAdmitted, State, SubmitInput
from ..state.execution import LeaseApplied


class AdmissionLeases(Protocol):
    def lease_at_admission(self, state: State, lineage: bytes, request: SubmitInput,
                           admitted: InputAdmitted) -> LeaseApplied | None:
        """The lease to journal right behind this admission, where the queue would lease it at once
        (its pages claimed now); None: the input queues as usual once its admission is saved."""
        ...

    def admissions_settled(self, keys: Sequence[tuple[bytes, int]]) -> None:
        """The round holding these pre-leased inputs (lineage, sequence) is written and applied:
        an input whose lease did not land goes to the queue (or is dropped, if its admission did
        not land either)."""
        ...
