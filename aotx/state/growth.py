"""A table that the log fills past its capacity grows by the rows it needs (in place, on an owned State).

The capacities are decide's bounds (a new row is refused with "<table> table is full (N rows)" while
the rows in use are at the capacity). They are not apply's: every event the log holds applies, on
every replay alike. Several runtimes write one journal, each deciding on its own applied state,
which may not yet hold another runtime's last writes; two of them can take a table's last free row
at once (docs/SCALE.md). A log written under larger capacities replays too. Both leave more rows in
use than the capacity: the table holds them, decide refuses new rows until enough are freed.

Growth is a pure function of the log (one row per event that needs one), so every replay of the
same log has the same tables and the same state hash. Only `apply_into`'s write phase calls these,
after every check has passed.
"""

from __future__ import annotations

import heapq

import numpy as np

from .state import State


def _grown(arr: np.ndarray, rows: int) -> np.ndarray:
    new = np.zeros(rows, dtype=arr.dtype)
    new[:len(arr)] = arr
    return new


def ensure_row(state: State, table: str, row: int) -> None:
    """Make append-only row `row` of `table` exist (participants, spaces, conversations, members)."""
    arr = getattr(state, table)
    if row < len(arr):
        return
    object.__setattr__(state, table, _grown(arr, row + 1))
    if table == "conversations":   # one admitted-input count per conversation row
        state.input_counts.extend([0] * (row + 1 - len(state.input_counts)))  # type: ignore[attr-defined]


def add_receipt_slot(state: State) -> None:
    """One more receipt slot (the next index), free: its per-slot lists and the free heap grow with it."""
    slot = len(state.receipts)
    object.__setattr__(state, "receipts", _grown(state.receipts, slot + 1))
    state.commands.append(b"")  # type: ignore[attr-defined]
    state.saves.append(None)  # type: ignore[attr-defined]
    state.executions.append(None)  # type: ignore[attr-defined]
    heapq.heappush(state.index.free, slot)
