"""Input execution: the per-receipt execution record and the runtime's execution transfers.

An input's admission (`InputAdmitted`, an ADMISSION transfer) makes a receipt whose execution
is `queued`. The runtime then journals, on the input author's lineage:

* LEASE transfers — `{"kind": "input.lease", "v": 1, "lease": <lease bytes>}` (aotx.journal.lease,
  revision 3 by default): each row assigns one queued input (actor = lineage, sequence) to an
  execution slot → `running`. Every row is checked before any receipt changes.
* OUTPUT transfers — `{"kind": "input.output", "v": 1, "actor", "sequence", "offset", "data"}`:
  the next bytes of the result; `offset` must be the bytes already saved.
* COMPLETION transfers — `{"kind": "input.completion", "v": 1, "actor", "sequence", "execution",
  "input_tokens", "output_tokens", "finish", "error"}`: the terminal result. `interrupted` is
  what a restart journals for an admission that had not finished (never re-executed);
  `deadline_exceeded` ends an input past its execution deadline (its receipt's status becomes 504).

`apply_execution_into` is pure over an owned State (as apply_into): it checks before it writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Union

from ..journal.errors import LeaseError
from ..journal.lease import Lease, LeaseRevision, RetentionMode, decode_lease
from ..journal.transfer import TransferKind
from .errors import ApplyError, EventCodecError
from .state import State
from .vocab import Execution, MutationKind, Terminal

VERSION = 1
LEASE_KIND, OUTPUT_KIND, COMPLETION_KIND = "input.lease", "input.output", "input.completion"
DEFAULT_LEASE_REVISION = LeaseRevision.R3
_U64 = (1 << 64) - 1


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


@dataclass(frozen=True)
class LeaseApplied:
    lineage: bytes
    lease: Lease


@dataclass(frozen=True)
class OutputAppended:
    lineage: bytes
    sequence: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class InputCompleted:
    lineage: bytes
    sequence: int
    execution: Execution
    input_tokens: int = 0
    output_tokens: int = 0
    finish: str = ""
    error: str = ""


ExecutionEvent = Union[LeaseApplied, OutputAppended, InputCompleted]
TRANSFER_KIND = {LeaseApplied: TransferKind.LEASE, OutputAppended: TransferKind.OUTPUT,
                 InputCompleted: TransferKind.COMPLETION}


def execution_body(e: ExecutionEvent) -> dict[str, Any]:
    if isinstance(e, LeaseApplied):
        from ..journal.lease import encode_lease
        return {"kind": LEASE_KIND, "v": VERSION, "actor": e.lineage, "lease": encode_lease(e.lease)}
    if isinstance(e, OutputAppended):
        return {"kind": OUTPUT_KIND, "v": VERSION, "actor": e.lineage, "sequence": e.sequence, "offset": e.offset,
                "data": e.data}
    return {"kind": COMPLETION_KIND, "v": VERSION, "actor": e.lineage, "sequence": e.sequence,
            "execution": int(e.execution), "input_tokens": e.input_tokens, "output_tokens": e.output_tokens,
            "finish": e.finish, "error": e.error}


_SHAPES = {
    LEASE_KIND: (TransferKind.LEASE, {"actor": bytes, "lease": bytes}),
    OUTPUT_KIND: (TransferKind.OUTPUT, {"actor": bytes, "sequence": int, "offset": int, "data": bytes}),
    COMPLETION_KIND: (TransferKind.COMPLETION, {"actor": bytes, "sequence": int, "execution": int,
                                                "input_tokens": int, "output_tokens": int, "finish": str,
                                                "error": str}),
}


def execution_from_body(transfer_kind: int, body: Any) -> ExecutionEvent:
    """Decode an execution transfer body; any unknown, missing, extra or mistyped field refuses."""
    if not isinstance(body, dict) or body.get("kind") not in _SHAPES:
        raise EventCodecError(f"not an execution transfer body: {body!r:.80}")
    kind = body["kind"]
    want_kind, fields = _SHAPES[kind]
    if int(transfer_kind) != want_kind:
        raise EventCodecError(f"a {kind} body in a kind {transfer_kind} transfer")
    if body.get("v") != VERSION:
        raise EventCodecError(f"{kind}: unknown encoding version {body.get('v')!r}")
    if set(body) != {"kind", "v", *fields}:
        raise EventCodecError(f"{kind}: fields {sorted(body)} are not {sorted({'kind', 'v', *fields})}")
    for name, typ in fields.items():
        value = body[name]
        if type(value) is not typ or (typ is int and not 0 <= value <= _U64):
            raise EventCodecError(f"{kind} field {name!r}: expected {typ.__name__}, got {value!r:.60}")
    if len(body["actor"]) != 16:
        raise EventCodecError(f"{kind}: actor must be 16 bytes")
    if kind == LEASE_KIND:
        try:
            return LeaseApplied(body["actor"], decode_lease(body["lease"]))
        except LeaseError as exc:
            raise EventCodecError(f"{kind}: {exc}") from None
    if kind == OUTPUT_KIND:
        return OutputAppended(body["actor"], body["sequence"], body["offset"], body["data"])
    try:
        status = Execution(body["execution"])
    except ValueError:
        raise EventCodecError(f"{kind}: unknown execution status {body['execution']}") from None
    if not status.terminal:
        raise EventCodecError(f"{kind}: execution {status.label} is not terminal")
    return InputCompleted(body["actor"], body["sequence"], status, body["input_tokens"], body["output_tokens"],
                          body["finish"], body["error"])


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
