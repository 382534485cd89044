"""The shared state: fixed-capacity tables plus the canonical bytes and save fields of each receipt slot.

A State is immutable: its arrays are read-only and `apply` returns a new State that shares
every table it did not change. Row lookups are vectorised scans over the used prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .capacities import Capacities
from .tables import empty_table, match16


@dataclass(frozen=True)
class Save:
    """Where the log saved an operation, from its ack (filled in by the runtime, not by apply)."""

    source: str                 # acknowledged stream
    incarnation: str            # file incarnation (stream created time / id)
    generation: int             # log sequence of the saving message
    boot: str                   # runtime boot id
    commit_digest: str          # hash chain over transfers, hex
    pending_bytes: int = 0
    disk_error: Optional[str] = None


@dataclass(frozen=True)
class State:
    capacities: Capacities
    participants: np.ndarray
    spaces: np.ndarray
    conversations: np.ndarray
    members: np.ndarray
    receipts: np.ndarray
    n_participants: int = 0
    n_spaces: int = 0
    n_conversations: int = 0
    n_members: int = 0
    commands: tuple[bytes, ...] = ()                 # canonical bytes per receipt slot (b"" = free)
    saves: tuple[Optional[Save], ...] = field(default=(), compare=False)  # not part of state_hash
    applied: int = 0                                  # events applied (the projection's position)

    # ---- lookups (row index or None) ----
    def participant_row(self, lineage: bytes) -> int | None:
        return _first(match16(self.participants["lineage"][:self.n_participants], lineage))

    def space_row(self, lineage: bytes, ident: bytes) -> int | None:
        s = self.spaces[:self.n_spaces]
        return _first(match16(s["lineage"], lineage) & match16(s["ident"], ident))

    def conversation_row(self, lineage: bytes, ident: bytes) -> int | None:
        c = self.conversations[:self.n_conversations]
        return _first(match16(c["lineage"], lineage) & match16(c["ident"], ident))

    def member_row(self, space: int, participant: int) -> int | None:
        m = self.members[:self.n_members]
        return _first((m["space"] == space) & (m["participant"] == participant))

    def receipt_slot(self, lineage: bytes, sequence: int) -> int | None:
        r = self.receipts
        return _first((r["used"] == 1) & (r["sequence"] == sequence) & match16(r["lineage"], lineage))

    def receipt_with_key(self, lineage: bytes, key: bytes) -> int | None:
        r = self.receipts
        return _first((r["used"] == 1) & match16(r["lineage"], lineage) & match16(r["operation_key"], key))

    def receipts_of(self, lineage: bytes) -> np.ndarray:
        r = self.receipts
        return np.flatnonzero((r["used"] == 1) & match16(r["lineage"], lineage))

    def free_receipts(self) -> int:
        return int(np.count_nonzero(self.receipts["used"] == 0))


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def empty_state(capacities: Capacities | None = None) -> State:
    caps = capacities or Capacities()
    return State(
        caps, empty_table("participants", caps), empty_table("spaces", caps),
        empty_table("conversations", caps), empty_table("members", caps), empty_table("receipts", caps),
        commands=(b"",) * caps.receipts, saves=(None,) * caps.receipts,
    )
