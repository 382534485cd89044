"""Input execution: the per-receipt execution record, and applying the execution events.

An input's admission (`InputAdmitted`, an ADMISSION transfer) makes a receipt whose execution
is `queued`. The runtime then journals, on the input author's lineage, the execution events of
aotx/state/execution_events.py (their bodies: aotx/state/codec.py, the one codec registry):
a lease (→ `running`; every row is checked before any receipt changes), outputs (the next bytes
of the result at the saved offset) and one completion (the terminal result). `interrupted` is
what a restart journals for an admission that had not finished (never re-executed);
`deadline_exceeded` ends an input past its execution deadline (its receipt's status becomes 504).

`apply_execution_into` is pure over an owned State (as apply_into): it checks before it writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ..journal.lease import Lease, LeaseRevision, RetentionMode
from .codec import TRANSFER_KIND, execution_body, execution_from_body
from .errors import ApplyError
from .execution_events import ExecutionEvent, InputCompleted, LeaseApplied, OutputAppended
from .state import State
from .vocab import Execution, MutationKind, Terminal

DEFAULT_LEASE_REVISION = LeaseRevision.R3
__all__ = ["DEFAULT_LEASE_REVISION", "TRANSFER_KIND", "ExecutionEvent", "ExecutionRecord", "InputCompleted",
           "LeaseApplied", "OutputAppended", "apply_execution_into", "default_lease", "execution_body",
           "execution_from_body", "input_slot"]


@dataclass(frozen=True)
class ExecutionRecord:
    """What a receipt slot holding an input knows about its execution (part of state_hash)."""

    model_digest: bytes
    page_limit: int
    status: Execution = Execution.QUEUED
    lease_slot: Optional[int] = None
    lease_revision: Optional[int] = None
    retention_mode: Optional[int] = None
    output: bytes = b""
    input_tokens: int = 0
    output_tokens: int = 0
    finish: Optional[str] = None
    error: Optional[str] = None
    cancel_requested: bool = False
    order: int = 0           # 1-based position in its conversation's input order (the event cursor)

    def digest_bytes(self) -> bytes:
        """A stable encoding for state_hash."""
        from ..journal.transfer import pack_body
        return pack_body([self.model_digest, self.page_limit, int(self.status), self.lease_slot, self.lease_revision,
                          self.retention_mode, self.output, self.input_tokens, self.output_tokens, self.finish,
                          self.error, self.cancel_requested, self.order])


def input_slot(state: State, lineage: bytes, sequence: int, where: str) -> int:
    slot = state.receipt_slot(lineage, sequence)
    if slot is None or int(state.receipts[slot]["kind"]) != MutationKind.INPUT or state.executions[slot] is None:
        raise ApplyError(f"{where}: no input receipt for lineage {lineage.hex()} sequence {sequence}")
    return slot


def apply_execution_into(state: State, e: ExecutionEvent) -> None:
    """Apply an execution transfer to an owned state; raises (ApplyError) before any write."""
    ex = state.executions
    if isinstance(e, LeaseApplied):
        where = f"lease revision {int(e.lease.revision)} of lineage {e.lineage.hex()}"
        if e.lease.revision < LeaseRevision.R2:
            raise ApplyError(f"{where}: new leases use revision 2 or later")
        writes = []
        for i, row in enumerate(e.lease.rows):
            if row.actor != e.lineage:
                raise ApplyError(f"{where}: row {i} names actor {row.actor.hex()}, not the transfer's lineage")
            slot = input_slot(state, row.actor, row.sequence, f"{where} row {i}")
            if ex[slot].status is not Execution.QUEUED:
                raise ApplyError(f"{where} row {i}: input {row.sequence} is {ex[slot].status.label}, not queued")
            writes.append((slot, replace(ex[slot], status=Execution.RUNNING, lease_slot=row.slot,
                                         lease_revision=int(e.lease.revision), retention_mode=row.retention_mode)))
        for slot, record in writes:
            ex[slot] = record  # type: ignore[index]
        return
    where = f"{type(e).__name__} of lineage {e.lineage.hex()} sequence {e.sequence}"
    slot = input_slot(state, e.lineage, e.sequence, where)
    cur = ex[slot]
    if isinstance(e, OutputAppended):
        if cur.status is not Execution.RUNNING:
            raise ApplyError(f"{where}: input is {cur.status.label}, not running")
        if e.offset != len(cur.output):
            raise ApplyError(f"{where}: offset {e.offset}, but {len(cur.output)} bytes are saved")
        if len(cur.output) + len(e.data) > state.capacities.result_bytes:
            raise ApplyError(f"{where}: result over the result bytes bound {state.capacities.result_bytes}")
        ex[slot] = replace(cur, output=cur.output + e.data)  # type: ignore[index]
        return
    if cur.status.terminal:
        raise ApplyError(f"{where}: input is already {cur.status.label}")
    if e.execution is Execution.COMPLETED and cur.status is not Execution.RUNNING:
        raise ApplyError(f"{where}: only a running input completes")
    ex[slot] = replace(cur, status=e.execution, input_tokens=e.input_tokens,  # type: ignore[index]
                       output_tokens=e.output_tokens, finish=e.finish or None, error=e.error or None)
    row = state.receipts[slot]
    row["terminal"] = int(Terminal.SAVED)
    if e.execution is Execution.DEADLINE_EXCEEDED:
        row["http_status"] = 504
    row["result_len"] = len(cur.output)


def default_lease(lineage: bytes, sequence: int, slot: int) -> Lease:
    from ..journal.lease import LeaseRow
    return Lease(DEFAULT_LEASE_REVISION, (LeaseRow(0, slot, sequence, lineage, int(RetentionMode.SOURCE_TEXT)),))
