"""The emitter: queues transfers and packs at most 16 records into each tick (one journal message)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .record import Record
from .transfer import pack_body, split_transfer

MAX_RECORDS_PER_TICK = 16


@dataclass(frozen=True)
class Tick:
    """One journal message. `completes` lists the transfer ids whose last part is in it.

    `msg_id` is deterministic (lineage hash, first transfer id and part), so re-sending the
    same tick after a lost ack is deduplicated by the log.
    """

    data: bytes
    records: int
    first: tuple[int, int]
    completes: tuple[int, ...]
    lineage_hash: int

    @property
    def msg_id(self) -> str:
        return f"j37-{self.lineage_hash:016x}-{self.first[0]}-{self.first[1]}"


class Emitter:
    """Transfers of one lineage, in submission order; their parts stay contiguous and ordered."""

    def __init__(self, lineage_hash: int, *, next_transfer_id: int = 1,
                 records_per_tick: int = MAX_RECORDS_PER_TICK) -> None:
        if not 1 <= records_per_tick <= MAX_RECORDS_PER_TICK:
            raise ValueError(f"records_per_tick must be 1..{MAX_RECORDS_PER_TICK}, got {records_per_tick}")
        if next_transfer_id < 1:
            raise ValueError("transfer ids start at 1")
        self.lineage_hash = lineage_hash
        self.next_transfer_id = next_transfer_id
        self.records_per_tick = records_per_tick
        self._queue: deque[Record] = deque()

    @property
    def pending(self) -> int:
        """Records waiting for a tick."""
        return len(self._queue)

    def submit(self, kind: int, body: Any) -> int:
        """Queue a transfer (body is packed with msgpack); returns its transfer id."""
        return self.submit_payload(kind, pack_body(body))

    def submit_payload(self, kind: int, payload: bytes) -> int:
        tid = self.next_transfer_id
        records = split_transfer(int(kind), tid, self.lineage_hash, payload)
        self.next_transfer_id += 1
        self._queue.extend(records)
        return tid

    def tick(self) -> Tick | None:
        """Take up to records_per_tick records off the queue as one message; None if idle."""
        if not self._queue:
            return None
        taken = [self._queue.popleft() for _ in range(min(self.records_per_tick, len(self._queue)))]
        completes = tuple(r.transfer_id for r in taken if r.part_index == r.part_count - 1)
        return Tick(
            data=b"".join(r.encode() for r in taken), records=len(taken),
            first=(taken[0].transfer_id, taken[0].part_index), completes=completes,
            lineage_hash=self.lineage_hash,
        )

    def drain(self) -> list[Tick]:
        ticks = []
        while (tick := self.tick()) is not None:
            ticks.append(tick)
        return ticks
