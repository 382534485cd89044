"""The journal writer: the one append path, the hold, and the read-back of unsynced subjects.

A round's ticks are grouped per lineage into flights (one subject each). `write` appends every
flight — where the log takes atomic batches and the round is large enough to gain from one, every
lineage of the round in ONE batch (one ack: aotx.runtime.batch_append), else lineages in parallel,
each flight's ticks one append at a time; either way each flight's ticks in order, guarded by the expected last subject sequence —
then applies every acknowledged tick through the projector in stream order, exactly as a replay
would, and tells the observers what it applied (aotx.runtime.observers).

Error mapping (one place, `refuse`): JournalFull → hold "full" (a transfer left partial keeps its
remaining ticks, unsynced); JournalUnavailable or any unexpected error → hold "unavailable", the
write's landing unknown: unsynced, and the connection is dropped once every append of the round
has its answer; ConcurrencyConflict → 409, the subject read back before answering; MessageTooLarge
→ 413 on a first tick, else the runtime stops (part of a command landed); a fresh message id
answered as a duplicate stops the runtime. Nothing is applied except what the log acknowledged.

Hold: while on hold each write first probes the log (stream_info: is there room?); an unsynced
subject is read back after the last message known (what landed is applied, a transfer left
partial is completed with its remaining ticks, unlanded ticks are dropped) before anything else is
written. The hold lifts once space returns and no subject is left unsynced.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Mapping, Optional

from eventlog import (BatchTooLarge, ConcurrencyConflict, EventLogError, JournalFull, JournalHold, MessageTooLarge,
                      StreamSpec)

from ..journal import Tick, lineage_hash
from ..state.mutations import Mutation
from .batch_append import BATCH_MIN_MESSAGES, append_batched
from .connection import JournalConnection
from .hold import HoldStatus
from .observers import NO_MUTATIONS, Applied, Observers
from .outcome import Outcome
from .replay import TICK_KIND, Projector, ReplayError

log = logging.getLogger("aotx.runtime")
MSG_OVERHEAD = 128   # per-message store overhead assumed when predicting whether a tick fits


@dataclass
class Unsynced:
    """A subject's ticks whose landing is unknown (no ack) or partial."""

    subject: str
    lineage_hash: int
    ticks: list[Tick]


@dataclass(eq=False)
class Flight:
    """One lineage's ticks of a round, appended in order on its subject. `continuation`: the ticks
    complete a transfer already partial in the log (a read-back's resend): none is a first tick."""

    subject: str
    lh: int
    ticks: list[Tick]
    landed: list[tuple[int, Tick]] = field(default_factory=list)   # (stream sequence, tick), acked
    error: Optional[Outcome] = None
    conflict: bool = False
    continuation: bool = False

    @property
    def partial(self) -> bool:
        """Would a refusal now leave part of a transfer in the log?"""
        return bool(self.landed) or self.continuation

    @property
    def rest(self) -> list[Tick]:
        return self.ticks[len(self.landed):]


class JournalWriter:
    """Owns the connection, the hold, the unsynced subjects and the one lock every write holds."""

    def __init__(self, connection: JournalConnection, spec: StreamSpec, boot_id: str, observers: Observers,
                 batch_min_messages: int = BATCH_MIN_MESSAGES) -> None:
        self.connection, self.spec, self.boot_id, self.observers = connection, spec, boot_id, observers
        self.batch_min_messages = max(1, int(batch_min_messages))   # a round this large goes as one batch
        self.hold = HoldStatus()
        self.projector: Projector | None = None   # set by boot
        self.failed: Optional[str] = None
        self.lock = asyncio.Lock()
        self.unsynced: dict[str, Unsynced] = {}
        self._attempt = 0
        self._drop_after = False
        self._subjects: dict[bytes, tuple[str, int]] = {}   # lineage → (its subject, its lineage hash)

    def flight(self, lineage: bytes, ticks: list[Tick]) -> Flight:
        at = self._subjects.get(lineage)
        if at is None:
            at = self._subjects[lineage] = (self.spec.subject(lineage.hex(), TICK_KIND), lineage_hash(lineage))
        return Flight(at[0], at[1], ticks)

    # ---- answers -----------------------------------------------------------------------------
    def held(self) -> Outcome:
        h = self.hold
        return Outcome.error(429, "journal_hold",
                             f"the journal is on hold ({h.reason}): {h.last_error}; pending bytes "
                             f"{h.pending_bytes}; nothing was changed, retry later with the same input")

    def failed_outcome(self) -> Outcome:
        return Outcome.error(503, "runtime_failed", f"the shared runtime stopped: {self.failed}")

    async def unready(self) -> Outcome | None:
        """Before a write round: the refusal when the runtime stopped, or when the log is still out of
        sync after reading it back (the hold stays); None when the round may write."""
        if self.failed:
            return self.failed_outcome()
        if self.unsynced:
            await self.resync()
            if self.unsynced:
                return self.held()
        return None

    # ---- the write path ----------------------------------------------------------------------
    async def write(self, flights: list[Flight], mutations: Mapping[tuple[bytes, int], Mutation] = NO_MUTATIONS) -> bool:
        """Append the flights and apply what landed. False when applying failed (the runtime stopped);
        a flight that did not fully land has `error` set (on hold with no room: every flight, and
        nothing is appended). `mutations`: the parsed commands of these ticks, for the observers."""
        if self.hold.active and not await self._fits([t for f in flights for t in f.ticks]):
            for f in flights:
                f.error = self.held()
            return True
        recorder = await self.connection.ensure()
        self._attempt += 1
        self._drop_after = False
        await self._append_all(recorder, flights)
        if self._drop_after:
            await self.connection.drop()
        landed = sorted(((seq, f.subject, tick) for f in flights for seq, tick in f.landed), key=lambda x: x[0])
        return all(self._feed(subject, seq, tick.data, mutations, tick.transfers) for seq, subject, tick in landed)

    async def settle(self, flights: list[Flight]) -> None:
        """After a round is applied: lift the hold when everything landed; read a conflicting subject back."""
        if all(f.error is None for f in flights) and not self.unsynced:
            self.hold.lift()
        conflicts = [f.subject for f in flights if f.conflict]
        if conflicts:  # read the other writer's messages back before answering 409
            await self.resync(conflicts)

    def msg_id(self, tick: Tick) -> str:
        """Fresh per write attempt: a re-sent tick after a read-back is a new message, never a duplicate."""
        return f"{tick.msg_id}-{self.boot_id[:12]}-{self._attempt}"

    def expected(self, f: Flight) -> int:
        """The stream sequence the flight's next tick expects as its subject's last."""
        assert self.projector is not None
        return f.landed[-1][0] if f.landed else self.projector.last_subject_seq.get(f.subject, 0)

    async def _append_all(self, recorder, flights: list[Flight]) -> None:
        """Every flight: as atomic batches where the log takes them and the round has at least
        `batch_min_messages` ticks (aotx.runtime.batch_append says why), else one append per tick."""
        if getattr(recorder, "atomic_batches", False) and \
                sum(len(f.ticks) - len(f.landed) for f in flights) >= self.batch_min_messages:
            flights = await append_batched(self, recorder, flights)   # those left to append one by one
        if len(flights) == 1:  # one lineage: no task per flight
            try:
                results: list = [await self._append(recorder, flights[0])]
            except Exception as exc:
                results = [exc]
        else:
            results = await asyncio.gather(*(self._append(recorder, f) for f in flights), return_exceptions=True)
        for f, result in zip(flights, results):
            if isinstance(result, BaseException):  # not a mapped journal error: its outcome is unknown
                if not isinstance(result, Exception):
                    raise result
                self.unknown(f, result)

    async def _append(self, recorder, f: Flight) -> None:
        """Append a flight's remaining ticks one by one, in order; the acked ones go to `f.landed`.
        Stops at the first failure, mapped to `f.error`."""
        for tick in f.rest:
            msg_id = self.msg_id(tick)
            try:
                ack = await recorder.append(f.subject, tick.data, msg_id=msg_id, expected_last_subject_seq=self.expected(f))
            except (JournalHold, ConcurrencyConflict, MessageTooLarge) as exc:
                self.refuse(f, exc)
                return
            if ack.duplicate:
                self.failed = f"journal answered a fresh message id {msg_id} as a duplicate (seq {ack.seq})"
                f.error = self.failed_outcome()
                return
            f.landed.append((ack.seq, tick))

    def refuse(self, f: Flight, exc: EventLogError) -> None:
        """Map a journal refusal of the flight's remaining ticks onto it (the one error mapping)."""
        rest, partial = f.rest, f.partial
        if isinstance(exc, JournalFull):
            self.hold.begin("full", str(exc), pending_bytes=_size(rest) if partial else 0, unsynced=partial)
            if partial:  # part of a transfer may be in the log: keep the rest to complete it
                self.unsynced[f.subject] = Unsynced(f.subject, f.lh, rest)
            f.error = self.held()
        elif isinstance(exc, JournalHold):  # JournalUnavailable: the write may or may not have landed
            self.hold.begin("unavailable", str(exc), pending_bytes=_size(rest), unsynced=True)
            self.unsynced[f.subject] = Unsynced(f.subject, f.lh, rest)
            self._drop_after = True   # after every append of the round has its answer
            f.error = self.held()
        elif isinstance(exc, ConcurrencyConflict):
            self.unsynced[f.subject] = Unsynced(f.subject, f.lh, rest if partial else [])
            f.conflict = True
            f.error = Outcome.error(409, "conflict", f"another writer appended to this lineage ({exc}); "
                                    "read /participant and retry")
        elif isinstance(exc, (MessageTooLarge, BatchTooLarge)) and not partial:
            f.error = Outcome.error(413, "too_large", str(exc))
        elif isinstance(exc, (MessageTooLarge, BatchTooLarge)):
            self.failed = f"a tick of a command is too large after earlier ticks landed: {exc}"
            f.error = self.failed_outcome()
        else:
            self.unknown(f, exc)

    def unknown(self, f: Flight, exc: Exception) -> None:
        """An append failed with an error the journal does not map: its landing is unknown."""
        log.warning("journal append on %s failed (%s: %s); reading it back before the next write",
                    f.subject, type(exc).__name__, exc)
        rest = f.rest
        self.hold.begin("unavailable", f"append: {type(exc).__name__}: {exc}", pending_bytes=_size(rest),
                        unsynced=True)
        self.unsynced[f.subject] = Unsynced(f.subject, f.lh, rest)
        self._drop_after = True
        f.error = self.held()

    def _feed(self, subject: str, seq: int, data: bytes,
              mutations: Mapping[tuple[bytes, int], Mutation] = NO_MUTATIONS, own: tuple = ()) -> bool:
        """Apply one acknowledged message (`own`: its tick's whole transfers, where it is ours)."""
        assert self.projector is not None
        try:
            done = self.projector.feed(subject, seq, data, own)
        except ReplayError as exc:
            self.failed = str(exc)
            log.error("shared runtime stopped: %s", exc)
            return False
        self.observers.notify(Applied(subject, seq, tuple(done), mutations))
        return True

    # ---- the hold ----------------------------------------------------------------------------
    async def _fits(self, ticks: list[Tick]) -> bool:
        """Probe while on hold: does the stream answer, and is there room for these ticks?"""
        try:
            info = await (await self.connection.ensure()).stream_info()
        except Exception as exc:  # any failure to answer keeps the hold
            self.hold.last_error = f"stream_info: {type(exc).__name__}: {exc}"
            return False
        need = sum(len(t.data) + MSG_OVERHEAD for t in ticks)
        return info.max_bytes is None or info.bytes + need <= info.max_bytes

    async def probe(self) -> bool:
        """Lift a hold once the log is back in sync and has room again; True when no hold is left."""
        async with self.lock:
            if self.unsynced:
                await self.resync()
            elif self.hold.active:
                try:
                    info = await (await self.connection.ensure()).stream_info()
                    room = info.max_bytes is None or info.bytes + 4 * MSG_OVERHEAD < info.max_bytes
                except Exception as exc:  # the log does not answer: the hold stays
                    self.hold.last_error = f"stream_info: {type(exc).__name__}: {exc}"
                    room = False
                if room:
                    self.hold.lift()
            return not self.hold.active

    async def probe_forever(self, interval: float) -> None:
        """Probe every `interval` seconds while on hold (a hold lifts without new mutations)."""
        while True:
            await asyncio.sleep(interval)
            if self.hold.active and not self.failed:
                try:
                    await self.probe()
                except Exception as exc:  # keep probing; the hold stays on
                    self.hold.last_error = f"probe: {type(exc).__name__}: {exc}"

    # ---- read-back ---------------------------------------------------------------------------
    async def resync(self, subjects: list[str] | None = None) -> None:
        """For each unsynced subject (all, or those named): read it back after the last known message,
        apply what landed, then complete a transfer left partial (resend its remaining ticks) or drop
        ticks that never landed. The hold lifts once no subject is left unsynced."""
        for subject in list(self.unsynced) if subjects is None else subjects:
            if subject in self.unsynced and not await self._resync_one(self.unsynced[subject]):
                return
        if not self.unsynced:
            self.hold.lift()

    async def catch_up(self, subject: str) -> bool:
        """Read a subject back after the last message known and apply what is there, in order. False
        when the log did not answer (the hold's last error says why) or applying failed (stopped)."""
        assert self.projector is not None
        try:
            recorder = await self.connection.ensure()
            start = self.projector.last_subject_seq.get(subject, 0) + 1
            async for msg in recorder.read(start, subject=subject):
                if not self._feed(msg.subject, msg.seq, msg.data):
                    return False
        except Exception as exc:  # server still away: stay on hold, try again on the next mutation
            self.hold.last_error = f"read-back: {type(exc).__name__}: {exc}"
            return False
        return True

    async def _resync_one(self, u: Unsynced) -> bool:
        assert self.projector is not None
        proj = self.projector
        if not await self.catch_up(u.subject):
            return False
        open_parts = proj.open_parts(u.lineage_hash)
        rest: list[Tick] = []
        if open_parts:  # a transfer is partial in the log: it must be completed, never dropped
            open_tid = next(t for h, t, _, _ in proj.reassembler.open_transfers if h == u.lineage_hash)
            rest = [t for t in u.ticks if t.first >= (open_tid, open_parts)]
            if not rest or rest[0].first != (open_tid, open_parts):
                self.failed = (f"journal read-back leaves transfer {open_tid} partial at part {open_parts}, "
                               "which no unacknowledged tick continues")
                return False
        # else: every transfer in the log is complete; ticks that did not land are dropped (nothing changed)
        del self.unsynced[u.subject]
        return not rest or await self._complete(Flight(u.subject, u.lineage_hash, rest, continuation=True))

    async def _complete(self, f: Flight) -> bool:
        """Resend the remaining ticks of a transfer left partial, through the one append path."""
        self._attempt += 1
        self._drop_after = False
        try:
            await self._append_all(await self.connection.ensure(), [f])
        except Exception as exc:
            self.unknown(f, exc)
        if self._drop_after:
            await self.connection.drop()
        if not all(self._feed(f.subject, seq, tick.data, own=tick.transfers) for seq, tick in f.landed):
            return False
        if f.conflict:
            await self.resync([f.subject])
        return f.error is None


def _size(ticks: list[Tick]) -> int:
    return sum(len(t.data) for t in ticks)
