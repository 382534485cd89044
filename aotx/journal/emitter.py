"""The emitter: queues transfers and packs at most 16 records into each tick (one journal message).

`whole=True` (a stored round's ticks, aotx.runtime.stored_round): a tick ends before a transfer that would
not fit in it whole (one larger than a tick still spans ticks), so a tick of such transfers carries them
(`Tick.transfers`) and the writer applies its own acknowledged tick without framing its bytes again; the
records and their order are the default packing's, only the cuts between messages differ."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .transfer import Transfer, encode_transfer, pack_body

MAX_RECORDS_PER_TICK = 16
_new = object.__new__


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


class _Queued:
    """A submitted transfer whose last part is not in a tick yet: its records, and how many are taken."""

    __slots__ = ("tid", "kind", "parts", "taken", "payload", "digest", "event")

    def __init__(self, tid: int, kind: int, parts: list[bytes], payload: bytes, digest: bytes, event: Any) -> None:
        self.tid, self.kind, self.parts, self.taken = tid, kind, parts, 0
        self.payload, self.digest, self.event = payload, digest, event


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
        self._queue: deque[_Queued] = deque()   # transfers with records not in a tick yet, in order
        self._pending = 0                        # how many records that is

    @property
    def pending(self) -> int:
        """Records waiting for a tick."""
        return self._pending

    def submit(self, kind: int, body: Any) -> int:
        """Queue a transfer (body is packed with msgpack); returns its transfer id."""
        return self.submit_payload(kind, pack_body(body))

    def submit_payload(self, kind: int, payload: bytes, event: Any = None) -> int:
        """Queue a transfer of msgpack `payload`; `event`: the event it encodes (kept on the tick's
        Transfer, Transfer.event), for a writer that applies its own tick without decoding it."""
        tid, kind = self.next_transfer_id, int(kind)
        digest, parts = encode_transfer(kind, tid, self.lineage_hash, payload)
        self.next_transfer_id += 1
        self._queue.append(_Queued(tid, kind, parts, payload, digest, event))
        self._pending += len(parts)
        return tid

    def tick(self) -> Tick | None:
        """Take up to records_per_tick records off the queue as one message; None if idle."""
        q = self._queue
        if not q:
            return None
        take = self._take()
        self._pending -= take
        head = q[0]
        first, starts_whole = (head.tid, head.taken), head.taken == 0
        chunks: list[bytes] = []
        done: list[_Queued] = []
        left, ends_whole = take, False
        while left:
            e = q[0]
            parts, at = e.parts, e.taken
            rest = len(parts) - at
            if rest <= left:   # its last part is in this tick
                chunks.extend(parts if at == 0 else parts[at:])
                done.append(q.popleft())
                left -= rest
                ends_whole = True
            else:
                chunks.extend(parts[at:at + left])
                e.taken = at + left
                left, ends_whole = 0, False
        transfers: tuple[Transfer, ...] = ()
        if starts_whole and ends_whole:
            lh, out = self.lineage_hash, []
            for e in done:
                t = _new(Transfer)   # a frozen dataclass: its fields set directly; `body` unpacked on first read
                t.__dict__.update(kind=e.kind, transfer_id=e.tid, lineage_hash=lh, payload=e.payload,
                                  event=e.event, digest=e.digest)
                out.append(t)
            transfers = tuple(out)
        return Tick(
            data=b"".join(chunks), records=take, first=first, completes=tuple(e.tid for e in done),
            lineage_hash=self.lineage_hash, transfers=transfers,
        )

    def _take(self) -> int:
        """How many records the next tick takes: as many as fit, or (whole) up to the last transfer that
        fits in it entirely — as many as fit when even the first does not."""
        q, per = self._queue, self.records_per_tick
        if self.whole and q[0].taken == 0:
            n = 0
            for e in q:   # every transfer after the first is untaken
                if n + len(e.parts) > per:
                    break
                n += len(e.parts)
            if n:
                return n
        return min(per, self._pending)

    def ticks_needed(self, whole: bool) -> int:
        """How many ticks the queued records make, cut whole (`whole=True`) or at every records_per_tick."""
        per = self.records_per_tick
        if not whole:
            return -(-self._pending // per)
        rest = [len(e.parts) - e.taken for e in self._queue]
        fresh = [e.taken == 0 for e in self._queue]
        ticks = i = 0
        while i < len(rest):
            ticks += 1
            if fresh[i]:
                n, j = 0, i
                while j < len(rest) and n + rest[j] <= per:
                    n, j = n + rest[j], j + 1
                if n:
                    i = j
                    continue
            left = per
            while left and i < len(rest):
                if rest[i] <= left:
                    left, i = left - rest[i], i + 1
                else:
                    rest[i], fresh[i], left = rest[i] - left, False, 0
        return ticks

    def drain(self) -> list[Tick]:
        ticks = []
        while (tick := self.tick()) is not None:
            ticks.append(tick)
        return ticks
