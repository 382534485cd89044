"""The emitter: queues transfers and packs at most 16 records into each tick (one journal message).

`whole=True` (a stored round's ticks, aotx.runtime.stored_round): a tick ends before a transfer that would
not fit in it whole (one larger than a tick still spans ticks), so a tick of such transfers carries them
(`Tick.transfers`) and the writer applies its own acknowledged tick without framing its bytes again; the
records and their order are the default packing's, only the cuts between messages differ."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .transfer import Transfer, encode_transfer, pack_body, unpack_body

MAX_RECORDS_PER_TICK = 16


@dataclass(frozen=True)
class Tick:
    """One journal message. `completes` lists the transfer ids whose last part is in it.

    `msg_id` is deterministic (lineage hash, first transfer id and part), so re-sending the
    same tick after a lost ack is deduplicated by the log.

    `transfers`: where the tick holds whole transfers only (it starts with a part 0 and ends with
    a last part), those transfers exactly as a Reassembler yields them from `data` (same payload,
    body and digest), so the writer can apply its own acknowledged tick without framing and
    verifying its own bytes again (Reassembler.accept_whole); else ().
    """

    data: bytes
    records: int
    first: tuple[int, int]
    completes: tuple[int, ...]
    lineage_hash: int
    transfers: tuple[Transfer, ...] = ()

    @property
    def msg_id(self) -> str:
        return f"j37-{self.lineage_hash:016x}-{self.first[0]}-{self.first[1]}"


class Emitter:
    """Transfers of one lineage, in submission order; their parts stay contiguous and ordered."""

    def __init__(self, lineage_hash: int, *, next_transfer_id: int = 1,
                 records_per_tick: int = MAX_RECORDS_PER_TICK, whole: bool = False) -> None:
        if not 1 <= records_per_tick <= MAX_RECORDS_PER_TICK:
            raise ValueError(f"records_per_tick must be 1..{MAX_RECORDS_PER_TICK}, got {records_per_tick}")
        if next_transfer_id < 1:
            raise ValueError("transfer ids start at 1")
        self.lineage_hash = lineage_hash
        self.next_transfer_id = next_transfer_id
        self.records_per_tick = records_per_tick
        self.whole = whole
        # a queued record: (transfer id, part index, part count, transfer kind, its encoded bytes)
        self._queue: deque[tuple[int, int, int, int, bytes]] = deque()
        self._payloads: dict[int, tuple[bytes, bytes]] = {}   # transfer id → (payload, digest), until its
        #                                                       last part is in a tick
        self._events: dict[int, Any] = {}       # transfer id → the event it encodes (submit_payload's `event`)

    @property
    def pending(self) -> int:
        """Records waiting for a tick."""
        return len(self._queue)

    def submit(self, kind: int, body: Any) -> int:
        """Queue a transfer (body is packed with msgpack); returns its transfer id."""
        return self.submit_payload(kind, pack_body(body))

    def submit_payload(self, kind: int, payload: bytes, event: Any = None) -> int:
        """Queue a transfer of msgpack `payload`; `event`: the event it encodes (kept on the tick's
        Transfer, Transfer.event), for a writer that applies its own tick without decoding it."""
        tid, kind = self.next_transfer_id, int(kind)
        digest, parts = encode_transfer(kind, tid, self.lineage_hash, payload)
        self.next_transfer_id += 1
        count = len(parts)
        self._queue.extend((tid, i, count, kind, data) for i, data in enumerate(parts))
        self._payloads[tid] = (payload, digest)
        if event is not None:
            self._events[tid] = event
        return tid

    def tick(self) -> Tick | None:
        """Take up to records_per_tick records off the queue as one message; None if idle."""
        if not self._queue:
            return None
        taken = [self._queue.popleft() for _ in range(self._take())]
        last = [r for r in taken if r[1] == r[2] - 1]     # the last part of a transfer
        completes = tuple(r[0] for r in last)
        payloads = [self._payloads.pop(tid) for tid in completes]
        events = [self._events.pop(tid, None) for tid in completes]
        whole = taken[0][1] == 0 and taken[-1][1] == taken[-1][2] - 1
        transfers: tuple[Transfer, ...] = ()
        if whole:
            out = []
            for r, (payload, digest), event in zip(last, payloads, events):
                t = Transfer(r[3], r[0], self.lineage_hash, payload, unpack_body(payload), event)
                t.__dict__["digest"] = digest
                out.append(t)
            transfers = tuple(out)
        return Tick(
            data=b"".join(r[4] for r in taken), records=len(taken),
            first=(taken[0][0], taken[0][1]), completes=completes,
            lineage_hash=self.lineage_hash, transfers=transfers,
        )

    def _take(self, at: int = 0, whole: bool | None = None) -> int:
        """How many records a tick beginning at queue index `at` takes: as many as fit, or (whole) up to
        the last transfer that fits in it entirely — as many as fit when even the first does not."""
        q, per = self._queue, self.records_per_tick
        limit = min(per, len(q) - at)
        if not (self.whole if whole is None else whole) or q[at][1] != 0:
            return limit
        n = 0
        while at + n < len(q) and n + q[at + n][2] <= per:
            n += q[at + n][2]     # the first part of the next transfer (parts are contiguous)
        return n or limit

    def ticks_needed(self, whole: bool) -> int:
        """How many ticks the queued records make, cut whole (`whole=True`) or at every records_per_tick."""
        if not whole:
            return -(-len(self._queue) // self.records_per_tick)
        ticks = i = 0
        while i < len(self._queue):
            i += self._take(i, True)
            ticks += 1
        return ticks

    def drain(self) -> list[Tick]:
        ticks = []
        while (tick := self.tick()) is not None:
            ticks.append(tick)
        return ticks
