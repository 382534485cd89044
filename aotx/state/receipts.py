"""Receipts: their JSON form, lookup by operation handle, and the save fields from the log's ack.

A handle `op-{lineage}-{id}` selects a receipt only when the slot's stored operation ID is
exactly that handle; a handle whose sequence is below its lineage's retry floor answers 410
even when its slot or its key has been reused since.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .decision import Refusal, gone, not_found
from .derive import operation_sequence
from .errors import IdError, StateError
from .ids import IdKind, parse_id
from .state import Save, State
from .tables import RECEIPT_ROW, raw
from .vocab import Admission, Commit, MutationKind, ResourceKind, Terminal, Transport

_RESOURCE_PREFIX = {ResourceKind.PARTICIPANT: IdKind.PARTICIPANT, ResourceKind.SPACE: IdKind.SPACE,
                    ResourceKind.CONVERSATION: IdKind.CONVERSATION, ResourceKind.MEMBER: IdKind.PARTICIPANT}
SAVE_FIELDS = ("source", "incarnation", "generation", "boot", "commit_digest", "pending_bytes", "disk_error")


def find_operation(state: State, lineage: bytes, handle: str) -> int | Refusal:
    """Receipt slot of an operation handle owned by `lineage`, or a 400/404/410 refusal."""
    try:
        rid = parse_id(handle, IdKind.OPERATION)
    except IdError as exc:
        return Refusal(400, "invalid_request", str(exc))
    if rid.lineage != lineage:
        return not_found(f"operation {handle} not found")
    prow = state.participant_row(lineage)
    if prow is None:
        return not_found(f"operation {handle} not found")
    seq = operation_sequence(rid.ident)
    slot = state.receipt_slot(lineage, seq)
    if slot is not None and raw(state.receipts[slot]["operation"]) == rid.ident:
        return slot
    if seq < int(state.participants[prow]["retry_floor"]):
        return gone(f"operation {handle} is retired (below the retry floor)")
    return not_found(f"operation {handle} not found")


_KIND_LABEL = {int(k): k.label for k in MutationKind}
_NAME = {cls: {int(v): v.name.lower() for v in cls} for cls in (Transport, Commit, Admission, Terminal)}
_TRANSPORT, _COMMIT, _ADMISSION, _TERMINAL = (_NAME[c] for c in (Transport, Commit, Admission, Terminal))
# a resource kind's ID prefix ("" for none), by its stored code
_PREFIX = {int(k): "" if k is ResourceKind.NONE else _RESOURCE_PREFIX[k].value for k in ResourceKind}
_OP = IdKind.OPERATION.value


def receipt_json(state: State, slot: int) -> dict[str, Any]:
    # the row as one unpack of its bytes (tables.RECEIPT_ROW): one numpy access, not one per field; the
    # IDs written as format_id writes them (the row's parts are 16 bytes by its layout)
    (used, lineage, sequence, operation, _key, kind, http_status, transport, commit, admission, terminal,
     resource_kind, resource_lineage, resource_ident, command_len, result_len) = RECEIPT_ROW.unpack(
        state.receipts[slot].tobytes())
    if not used:
        raise StateError(f"receipt slot {slot} is free")
    prefix = _PREFIX.get(resource_kind)
    if prefix is None:
        ResourceKind(resource_kind)   # a code no resource kind has: the ValueError it always raised
    save = state.saves[slot]
    out = {
        "operation": f"{_OP}-{lineage.hex()}-{operation.hex()}",
        "sequence": str(sequence),
        "kind": _KIND_LABEL[kind],
        "status_code": http_status,
        "status": {
            "transport": _TRANSPORT[transport],
            "commit": _COMMIT[commit],
            "admission": _ADMISSION[admission],
            "terminal": _TERMINAL[terminal],
        },
        "resource": f"{prefix}-{resource_lineage.hex()}-{resource_ident.hex()}" if prefix else None,
        "command_bytes": command_len,
        "result_bytes": result_len,
        "save": dict.fromkeys(SAVE_FIELDS) if save is None else {name: getattr(save, name) for name in SAVE_FIELDS},
    }
    if state.executions[slot] is not None:
        out.update(_execution_json(state, slot))
    return out


def _execution_json(state: State, slot: int) -> dict[str, Any]:
    """Inputs only: `execution` and, once saved, the terminal result's summary."""
    record = state.executions[slot]
    if record is None:
        return {}
    out: dict[str, Any] = {"execution": record.status.label, "model_digest": record.model_digest.hex(),
                           "page_limit": record.page_limit, "cancel_requested": record.cancel_requested,
                           "event_cursor": record.order,
                           "lease": None if record.lease_slot is None else {
                               "slot": record.lease_slot, "revision": record.lease_revision,
                               "retention_mode": record.retention_mode},
                           "output_bytes": len(record.output), "result": None}
    if record.status.terminal:
        out["result"] = {"byte_length": len(record.output), "input_tokens": record.input_tokens,
                         "output_tokens": record.output_tokens, "finish": record.finish, "error": record.error}
    return out


def record_save(state: State, slot: int, save: Save) -> State:
    """Fill a receipt's save fields from the log's ack. Not part of state_hash."""
    if not int(state.receipts[slot]["used"]):
        raise StateError(f"receipt slot {slot} is free")
    saves = list(state.saves)
    saves[slot] = save
    new = replace(state, saves=tuple(saves))
    object.__setattr__(new, "_index", state.index)  # same tables, same index (neither is ever changed)
    return new
