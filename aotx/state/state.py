"""The shared state: fixed-capacity tables plus the canonical bytes and save fields of each receipt slot.

A State is immutable to its readers: its arrays are read-only and `apply` returns a new State.
The tables are the source of truth (and all that `state_hash` covers); beside them each State
keeps a hash index (id → row, built from the tables on first use and carried forward by
`apply`), so lookups cost a dict probe instead of a scan. The runtime's projector owns its
State and advances it in place with `apply_into` (aotx.state.apply), which a test holds equal
to `apply`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from .capacities import Capacities
from .tables import empty_table


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


class Index:
    """Hash indexes over the used rows of a State's tables (derived data, never hashed).

    participants: lineage → row; spaces, conversations: lineage+ident → row; members:
    (space row, participant row) → row; receipts: (lineage, sequence) → slot; keys:
    (lineage, operation key) → slots; by_lineage: lineage → slots; free: a heap of free slots.
    Where the tables could hold a key twice, the lowest row wins, as the scans did.
    """

    __slots__ = ("participants", "spaces", "conversations", "members", "receipts", "keys", "by_lineage", "free")

    def __init__(self) -> None:
        self.participants: dict[bytes, int] = {}
        self.spaces: dict[bytes, int] = {}
        self.conversations: dict[bytes, int] = {}
        self.members: dict[tuple[int, int], int] = {}
        self.receipts: dict[tuple[bytes, int], int] = {}
        self.keys: dict[tuple[bytes, bytes], list[int]] = {}
        self.by_lineage: dict[bytes, set[int]] = {}
        self.free: list[int] = []

    @classmethod
    def build(cls, s: "State") -> "Index":
        ix = cls()
        lin = s.participants["lineage"][:s.n_participants].tobytes()
        for i in range(s.n_participants):
            ix.participants.setdefault(lin[16 * i:16 * i + 16], i)
        for name, count, target in (("spaces", s.n_spaces, ix.spaces),
                                    ("conversations", s.n_conversations, ix.conversations)):
            arr = getattr(s, name)[:count]
            lin, ident = arr["lineage"].tobytes(), arr["ident"].tobytes()
            for i in range(count):
                target.setdefault(lin[16 * i:16 * i + 16] + ident[16 * i:16 * i + 16], i)
        m = s.members[:s.n_members]
        for i, key in enumerate(zip(m["space"].tolist(), m["participant"].tolist())):
            ix.members.setdefault(key, i)
        r = s.receipts
        used = r["used"].tolist()
        lin, keys, seqs = r["lineage"].tobytes(), r["operation_key"].tobytes(), r["sequence"].tolist()
        for slot, u in enumerate(used):
            if u == 1:
                ix.add_receipt(slot, lin[16 * slot:16 * slot + 16], seqs[slot], keys[16 * slot:16 * slot + 16])
            elif u == 0:
                ix.free.append(slot)
        heapq.heapify(ix.free)
        return ix

    def copy(self) -> "Index":
        ix = Index.__new__(Index)
        ix.participants, ix.spaces = self.participants.copy(), self.spaces.copy()
        ix.conversations, ix.members = self.conversations.copy(), self.members.copy()
        ix.receipts = self.receipts.copy()
        ix.keys = {k: v.copy() for k, v in self.keys.items()}
        ix.by_lineage = {k: v.copy() for k, v in self.by_lineage.items()}
        ix.free = self.free.copy()
        return ix

    def add_receipt(self, slot: int, lineage: bytes, sequence: int, key: bytes) -> None:
        self.receipts.setdefault((lineage, sequence), slot)
        k = (lineage, key)
        slots = self.keys.get(k)   # (get first: no list or set made for a key already held)
        if slots is None:
            self.keys[k] = [slot]
        else:
            slots.append(slot)
            slots.sort()
        mine = self.by_lineage.get(lineage)
        if mine is None:
            self.by_lineage[lineage] = {slot}
        else:
            mine.add(slot)

    def drop_receipts(self, lineage: bytes, slots: list[int], sequences: list[int], keys: list[bytes]) -> None:
        """Forget the receipts in `slots` of one lineage (each with its sequence and key), in order (a
        retirement's): their sequence and key entries, their lineage's set, the slots freed for reuse."""
        receipts, held, free, push = self.receipts, self.keys, self.free, heapq.heappush
        for slot, sequence, key in zip(slots, sequences, keys):
            k = (lineage, sequence)
            if receipts.get(k) == slot:
                del receipts[k]
            k = (lineage, key)
            same = held.get(k)
            if same is not None and slot in same:
                same.remove(slot)
                if not same:
                    del held[k]
            push(free, slot)
        mine = self.by_lineage.get(lineage)
        if mine is not None:
            mine.difference_update(slots)   # (the lineage's set: each slot discarded, in one call)
            if not mine:
                del self.by_lineage[lineage]


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
    commands: Sequence[bytes] = ()                   # canonical bytes per receipt slot (b"" = free)
    saves: Sequence[Optional[Save]] = field(default=(), compare=False)  # not part of state_hash
    executions: Sequence[Any] = ()                    # per receipt slot: ExecutionRecord of an input, else None
    input_counts: Sequence[int] = ()                  # per conversation row: inputs admitted (event order)
    applied: int = 0                                  # events applied (the projection's position)
    # derived from the tables; `replace` leaves it out, so a replaced State rebuilds its own
    _index: Any = field(default=None, init=False, compare=False, repr=False)

    @property
    def index(self) -> Index:
        ix = self._index
        if ix is None:
            ix = Index.build(self)
            object.__setattr__(self, "_index", ix)
        return ix

    # ---- lookups (row index or None) ----
    def participant_row(self, lineage: bytes) -> int | None:
        return self.index.participants.get(bytes(lineage))

    def space_row(self, lineage: bytes, ident: bytes) -> int | None:
        return self.index.spaces.get(bytes(lineage) + bytes(ident))

    def conversation_row(self, lineage: bytes, ident: bytes) -> int | None:
        return self.index.conversations.get(bytes(lineage) + bytes(ident))

    def member_row(self, space: int, participant: int) -> int | None:
        return self.index.members.get((int(space), int(participant)))

    def receipt_slot(self, lineage: bytes, sequence: int) -> int | None:
        return self.index.receipts.get((bytes(lineage), int(sequence)))

    def receipt_with_key(self, lineage: bytes, key: bytes) -> int | None:
        slots = self.index.keys.get((bytes(lineage), bytes(key)))
        return slots[0] if slots else None

    def receipts_of(self, lineage: bytes) -> np.ndarray:
        return np.array(sorted(self.index.by_lineage.get(bytes(lineage), ())), dtype=np.intp)

    def free_receipts(self) -> int:
        """Receipts a new operation may still take: the capacity less the receipts in use (0 where the
        log holds more than the capacity: aotx.state.growth). Not the table's free slots."""
        in_use = len(self.receipts) - len(self.index.free)
        return max(0, self.capacities.receipts - in_use)


def empty_state(capacities: Capacities | None = None) -> State:
    caps = capacities or Capacities()
    return State(
        caps, empty_table("participants", caps), empty_table("spaces", caps),
        empty_table("conversations", caps), empty_table("members", caps), empty_table("receipts", caps),
        commands=(b"",) * caps.receipts, saves=(None,) * caps.receipts, executions=(None,) * caps.receipts,
        input_counts=(0,) * caps.conversations,
    )
