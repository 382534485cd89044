"""The reassembler: yields a transfer only when every part is present and consistent.

Rules, per lineage hash: parts of a transfer arrive contiguous and in order (index 0..count-1),
with the same kind and count; each body matches its crc32c; non-final parts are full (160 bytes);
the trailing digest matches; the payload is valid msgpack; transfer ids strictly increase.

recovery=True (boot replay): the first fault raises TransferError and nothing of that transfer is
applied; finish() raises if a transfer is left partial. recovery=False (live tail): the faulty
transfer is dropped, the fault is kept in `faults`, and reading goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .crc32c import crc32c
from .errors import JournalFormatError, RecordError, TransferError
from .record import MAX_BODY, Record, iter_records
from .transfer import DIGEST_SIZE, Transfer, transfer_digest, unpack_body
from .whole import whole_transfers


def _fault(r: Record, position: int | None, code: str, reason: str, tid: int | None = None) -> TransferError:
    return TransferError(code, reason, transfer_id=r.transfer_id if tid is None else tid,
                         part_index=r.part_index, part_count=r.part_count,
                         kind=r.transfer_kind, lineage_hash=r.lineage_hash, position=position)


@dataclass
class _Open:
    first: Record
    parts: list[bytes] = field(default_factory=list)


class Reassembler:
    def __init__(self, *, recovery: bool = True) -> None:
        self.recovery = recovery
        self.faults: list[JournalFormatError] = []
        self._open: dict[int, _Open] = {}
        self._last_id: dict[int, int] = {}

    @property
    def last_ids(self) -> dict[int, int]:
        """lineage hash → id of the last transfer completed on it (what a resumed reassembler needs)."""
        return dict(self._last_id)

    @classmethod
    def resume(cls, last_ids: dict[int, int], *, recovery: bool = True) -> "Reassembler":
        """A reassembler that goes on after the transfers `last_ids` (none open), as the one that read them
        would (aotx.snapshot: a projection restored from a snapshot)."""
        r = cls(recovery=recovery)
        r._last_id = {int(lh): int(tid) for lh, tid in last_ids.items()}
        return r

    @property
    def open_transfers(self) -> list[tuple[int, int, int, int]]:
        """(lineage_hash, transfer_id, parts seen, part_count) of each partial transfer."""
        return [(lh, o.first.transfer_id, len(o.parts), o.first.part_count) for lh, o in self._open.items()]

    def feed_message(self, data: bytes, position: int | None = None, raw: bool = False) -> list[Transfer]:
        """Feed one journal message; returns the transfers it completed, in order. `raw`: a transfer the fast
        path decoded into a deferred kind's Struct comes as its RAW item (aotx.journal.whole: `transfer_of`
        makes its Transfer)."""
        fast = whole_transfers(data, self._open, self._last_id, raw)   # the common message, in one loop
        if fast is not None:
            t = fast[-1]
            if raw and t.__class__ is tuple:   # a RAW item: (kind, id, lineage hash, …)
                self._last_id[t[2]] = t[1]
            else:
                self._last_id[t.lineage_hash] = t.transfer_id
            return fast
        return self.feed_records(data, position)

    def feed_records(self, data: bytes, position: int | None = None) -> list[Transfer]:
        """`feed_message` record by record (what it does for any message the fast path declines)."""
        done: list[Transfer] = []
        try:
            for record in iter_records(data, position, verify_crc=False):
                transfer = self.feed_record(record, position)
                if transfer is not None:
                    done.append(transfer)
        except RecordError as exc:
            if self.recovery:
                raise
            self.faults.append(exc)  # the rest of this message cannot be framed
        return done

    def accept_whole(self, lh: int, transfers: tuple[Transfer, ...]) -> bool:
        """Take whole transfers of lineage `lh` as if fed from their records (a writer's own tick,
        Tick.transfers): only where nothing is open on the lineage and their ids increase from the
        last one applied; False (nothing taken) otherwise — feed the message's bytes instead."""
        if not transfers or lh in self._open:
            return False
        last = self._last_id.get(lh)
        for t in transfers:
            if t.lineage_hash != lh or (last is not None and t.transfer_id <= last):
                return False
            last = t.transfer_id
        self._last_id[lh] = last
        return True

    def feed_record(self, record: Record, position: int | None = None) -> Transfer | None:
        try:
            return self._feed(record, position)
        except TransferError as exc:
            if self.recovery:
                raise
            self.faults.append(exc)
            current = self._open.get(record.lineage_hash)
            if current is not None and current.first.transfer_id == exc.transfer_id:
                del self._open[record.lineage_hash]
            if exc.code == "interleaved":  # the interrupted transfer is gone; this record may start anew
                return self.feed_record(record, position)
            return None

    def finish(self) -> None:
        """End of input. In recovery a partial transfer is an error; live, it may still complete."""
        if self.recovery and self._open:
            lh, tid, seen, count = self.open_transfers[0]
            first = self._open[lh].first
            raise TransferError("incomplete", f"only {seen} of {count} parts present; part {seen} missing",
                                transfer_id=tid, part_index=seen, part_count=count,
                                kind=first.transfer_kind, lineage_hash=lh)

    def _feed(self, r: Record, position: int | None) -> Transfer | None:
        lh = r.lineage_hash

        def fault(code: str, reason: str, tid: int | None = None) -> TransferError:
            return _fault(r, position, code, reason, tid)

        if r.crc is not None and crc32c(r.body) != r.crc:
            raise fault("checksum", f"header crc32c {r.crc:#010x}, body crc32c {crc32c(r.body):#010x}")
        if r.part_count == 0 or r.part_index >= r.part_count:
            raise fault("count", f"part index {r.part_index} not below part count {r.part_count}")
        current = self._open.get(lh)
        if current is None:
            if r.part_index != 0:
                raise fault("order", f"part {r.part_index} arrived with no part 0 before it")
            last = self._last_id.get(lh)
            if last is not None and r.transfer_id <= last:
                raise fault("duplicate", f"transfer id {r.transfer_id} not above the last applied id {last}")
            current = self._open[lh] = _Open(r)
        else:
            first = current.first
            expected = len(current.parts)
            if r.transfer_id != first.transfer_id:
                del self._open[lh]
                raise fault("interleaved", f"transfer {r.transfer_id} part {r.part_index} arrived while part "
                            f"{expected}/{first.part_count} was expected", tid=first.transfer_id)
            if r.part_index != expected:
                code = "duplicate" if r.part_index < expected else "order"
                raise fault(code, f"expected part {expected}, got part {r.part_index}")
            if r.part_count != first.part_count:
                raise fault("count", f"part count {r.part_count} differs from part 0's {first.part_count}")
            if r.transfer_kind != first.transfer_kind:
                raise fault("kind", f"kind {r.transfer_kind} differs from part 0's {first.transfer_kind}")
        if r.part_index < r.part_count - 1 and len(r.body) != MAX_BODY:
            raise fault("length", f"non-final part carries {len(r.body)} bytes, not {MAX_BODY}")
        current.parts.append(r.body)
        if len(current.parts) < r.part_count:
            return None
        return self._complete(lh, current, fault)

    def _complete(self, lh: int, current: _Open, fault) -> Transfer:
        del self._open[lh]
        first = current.first
        data = b"".join(current.parts)
        if len(data) < DIGEST_SIZE:
            raise fault("length", f"{len(data)} bytes cannot hold the {DIGEST_SIZE}-byte digest")
        payload, digest = data[:-DIGEST_SIZE], data[-DIGEST_SIZE:]
        want = transfer_digest(first.transfer_kind, first.transfer_id, lh, payload)
        if digest != want:
            raise fault("digest", f"transfer digest {digest.hex()} != computed {want.hex()}")
        try:
            body = unpack_body(payload)
        except Exception as exc:  # msgpack raises several unrelated types
            raise fault("body", f"payload is not one valid msgpack value: {type(exc).__name__}: {exc}") from exc
        self._last_id[lh] = first.transfer_id
        transfer = Transfer(first.transfer_kind, first.transfer_id, lh, payload, body)
        transfer.__dict__["digest"] = want  # the cached_property's slot: verified equal just above
        return transfer
