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

Stream order: the projector always holds a prefix of the stream, as a replay's would. A flight
whose subject may hold a message it did not hear acknowledged (a lost ack, an unmapped error, a
conflict with another writer) bounds what its round applies: only acknowledged messages up to
that flight's last acknowledged one (or, with none, up to the last message applied before the
round), and on through acknowledged messages that follow it without a hole (nothing unknown can
lie before them); an acknowledged message of another flight beyond that bound is not applied now,
its commands answer the hold and its subject is unsynced too, so the read-back applies it in order.

Hold: while on hold each write first probes the log (stream_info: is there room?); the log is read
back after the last message applied, every subject in stream order (what landed is applied), then
each unsynced subject's transfer left partial is completed with its remaining ticks and unlanded
ticks are dropped, before anything else is written. The hold lifts once space returns and no
subject is left unsynced.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from typing import Callable, Mapping, Optional

from eventlog import (BatchTooLarge, ConcurrencyConflict, EventLogError, JournalFull, JournalHold, MessageTooLarge,
                      StreamSpec)

from ..journal import Tick, lineage_hash
from ..state.mutations import Mutation
from .batch_append import BATCH_MIN_MESSAGES, append_batched
from .connection import JournalConnection
from .flight import Flight, Unsynced
from .early_apply import EarlyApply
from .group_commit import WriterLock
from .hold import HoldStatus, has_room
from .journal_metrics import JournalMetrics
from .observers import NO_MUTATIONS, Applied, Observers
from .outcome import Outcome
from .round_stats import STATS, clock
from .write_order import append_guarded, append_sent, feed_landed, held_flights
from ..projection import TICK_KIND, Projector, ReplayError

log = logging.getLogger("aotx.runtime")
MSG_OVERHEAD = 128   # per-message store overhead assumed when predicting whether a tick fits


class JournalWriter:
    """Owns the connection, the hold, the unsynced subjects and the one lock every write holds."""

    def __init__(self, connection: JournalConnection, spec: StreamSpec, boot_id: str, observers: Observers,
                 batch_min_messages: int = BATCH_MIN_MESSAGES) -> None:
        self.connection, self.spec, self.boot_id, self.observers = connection, spec, boot_id, observers
        self.batch_min_messages = max(1, int(batch_min_messages))   # a round this large goes as one batch
        self.hold = HoldStatus()
        self.metrics = JournalMetrics(self.hold, lambda: 0 if self.projector is None else self.applied_seq())
        self.projector: Projector | None = None   # set by boot
        self.failed: Optional[str] = None
        self.lock = WriterLock()
        self.unsynced: dict[str, Unsynced] = {}
        self._attempt = 0
        self._drop_after = False
        self._appending = 0   # appends in flight (pipelined rounds: aotx.runtime.pipeline)
        self.early = EarlyApply()
        self._subjects: dict[bytes, tuple[str, int]] = {}   # lineage → (its subject, its lineage hash)
        # leases (aotx.runtime.ownership): only a lineage this runtime holds is written; None: every one
        self.may_write: Optional[Callable[[bytes], bool]] = None
        self.catch_up = False   # follow mode: each command round first applies the log to its end (catch_up.py)
        self.follower = None    # follow mode: what its consumer heard is applied before reading back (catch_up.py)

    def flight(self, lineage: bytes, ticks: list[Tick]) -> Flight:
        at = self._subjects.get(lineage)
        if at is None:
            at = self._subjects[lineage] = (self.spec.subject(lineage.hex(), TICK_KIND), lineage_hash(lineage))
        return Flight(at[0], at[1], ticks, lineage=lineage)

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
    async def write(self, flights: list[Flight], mutations: Mapping[tuple[bytes, int], Mutation] = NO_MUTATIONS,
                    *, chain_min: int | None = None) -> bool:
        """Append the flights and apply what landed (`append`, then `apply_landed`). False when applying
        failed (the runtime stopped); a flight that did not fully land has `error` set."""
        await self.append(flights, chain_min=chain_min)
        return await self.apply_landed(flights, mutations)

    async def append(self, flights: list[Flight], *, chain_min: int | None = None) -> None:
        """Append the flights (acked ticks to each flight's `landed`, refusals to its `error`; on hold
        with no room: every flight refused, nothing appended). `chain_min`: a flight of at least that
        many ticks goes as an atomic batch even in a round smaller than `batch_min_messages` (its ticks
        would otherwise be a chain of acks, one after the other). Appends of pipelined rounds may be in
        flight together (aotx.runtime.pipeline): the connection is dropped, where one asked, once none is."""
        if self.hold.active and not await has_room(self.connection, self.hold,
                                                   sum(len(t.data) + MSG_OVERHEAD for f in flights for t in f.ticks)):
            for f in flights:
                f.error = self.held()
            return
        await self._appended(await self.connection.ensure(), held_flights(self, flights), chain_min)

    async def _appended(self, recorder, flights: list[Flight], chain_min: int | None = None) -> None:
        self._attempt += 1
        if not self._appending:
            self._drop_after = False
        self._appending += 1
        try:
            await self._append_all(recorder, flights, chain_min)
        finally:
            self._appending -= 1
        if self._drop_after and not self._appending:
            await self.connection.drop()

    async def apply_landed(self, flights: list[Flight],
                           mutations: Mapping[tuple[bytes, int], Mutation] = NO_MUTATIONS) -> bool:
        """Apply the flights' acknowledged ticks in stream order (nothing else is applied); False when
        applying failed (the runtime stopped). `mutations`: the parsed commands of these ticks, for the
        observers. A message whose landing is unknown — this round's, or an earlier round's still
        unsynced — bounds what is applied now; the rest goes to the read-back (the writer's docstring)."""
        self.early.forget(flights)
        mine = {f.subject for f in flights}
        gaps = [f for f in flights if f.gap]
        if gaps or any(s not in mine for s in self.unsynced):   # (nothing of these flights is applied yet)
            bound = min([f.landed[-1][0] if f.landed else self.applied_seq() for f in gaps]
                        + ([self.applied_seq()] if any(s not in mine for s in self.unsynced) else []))
            for seq in sorted(seq for f in flights for seq, _ in f.landed):
                if seq == bound + 1:   # acknowledged and right behind the bound: no unknown message before it
                    bound = seq
                elif seq > bound:
                    break
            for f in flights:
                self._defer(f, bound)
        landed = sorted(((seq, f.subject, tick) for f in flights for seq, tick in f.landed), key=lambda x: x[0])
        return await feed_landed(self, flights, landed, mutations)

    def applied_seq(self) -> int:
        """The last stream sequence applied (the projector holds every message up to it)."""
        assert self.projector is not None
        return self.projector.applied_seq   # kept by the projector as it applies: O(1)

    def _defer(self, f: Flight, bound: int) -> None:
        """Leave a flight's acknowledged ticks past `bound` to the read-back (applied there, in stream
        order); its commands answer the hold."""
        kept = [(seq, tick) for seq, tick in f.landed if seq <= bound]
        if len(kept) == len(f.landed):
            return
        f.landed, rest = kept, f.ticks[len(kept):]
        self.unsynced[f.subject] = Unsynced(f.subject, f.lh, rest)
        if not self.hold.active:
            self.hold.begin("unavailable", "a write landed after one whose outcome is unknown: reading the log back",
                            pending_bytes=_size(rest), unsynced=True)
        f.error = f.error or self.held()

    async def settle(self, flights: list[Flight]) -> None:
        """After a round is applied: lift the hold when everything landed; read a conflicting subject back."""
        if all(f.error is None for f in flights) and not self.unsynced:
            self.hold.lift()
        if any(f.conflict for f in flights):  # read the other writer's messages back before answering 409
            await self.resync()

    def msg_id(self, tick: Tick) -> str:
        """Fresh per write attempt: a re-sent tick after a read-back is a new message, never a duplicate."""
        return f"{tick.msg_id}-{self.boot_id[:12]}-{self._attempt}"

    def expected(self, f: Flight) -> int:
        """The stream sequence the flight's next tick expects as its subject's last."""
        assert self.projector is not None
        if f.landed:
            return f.landed[-1][0]
        return self.projector.last_subject_seq.get(f.subject, 0) if f.base is None else f.base

    async def _append_all(self, recorder, flights: list[Flight], chain_min: int | None = None) -> None:
        """Every flight: as atomic batches where the log takes them and the round has at least
        `batch_min_messages` ticks (aotx.runtime.batch_append says why) — or a flight has at least
        `chain_min` — else one append per tick."""
        left = [len(f.ticks) - len(f.landed) for f in flights]
        if getattr(recorder, "atomic_batches", False) and \
                (sum(left) >= self.batch_min_messages or (chain_min is not None and max(left, default=0) >= chain_min)):
            flights = await append_batched(self, recorder, flights)   # those left to append one by one
        if len(flights) == 1:  # one lineage: no task per flight
            try:
                results: list = [await self._append(recorder, flights[0])]
            except Exception as exc:
                results = [exc]
        elif getattr(type(recorder), "send_append", None) is not None and recorder.sends_appends and \
                all(len(f.ticks) - len(f.landed) == 1 for f in flights):   # (eventlog.recorder: on the class)
            results = await append_sent(self, recorder, flights)
        else:
            results = await asyncio.gather(*(self._append(recorder, f) for f in flights), return_exceptions=True)
        for f, result in zip(flights, results):
            if isinstance(result, BaseException):  # not a mapped journal error: its outcome is unknown
                if not isinstance(result, Exception):
                    raise result
                self.unknown(f, result)

    async def _append(self, recorder, f: Flight, sent: Optional[tuple] = None) -> None:
        """Append a flight's remaining ticks one by one, in order; the acked ones go to `f.landed`.
        Stops at the first failure, mapped to `f.error`. `sent`: its first tick was sent already
        (write_order.append_sent)."""
        for tick in f.rest:
            msg_id = self.msg_id(tick) if sent is None else sent[3]
            try:
                ack = await append_guarded(self, recorder, f, tick, msg_id, sent)
                sent = None
            except (JournalHold, ConcurrencyConflict, MessageTooLarge) as exc:
                self.refuse(f, exc)
                return
            if ack.duplicate:
                self.failed = f"journal answered a fresh message id {msg_id} as a duplicate (seq {ack.seq})"
                f.error = self.failed_outcome()
                return
            f.landed.append((ack.seq, tick))
            self.early.acked(self, f, ack.seq, tick)

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
            f.error, f.gap = self.held(), True
        elif isinstance(exc, ConcurrencyConflict):
            self.unsynced[f.subject] = Unsynced(f.subject, f.lh, rest if partial else [])
            f.conflict = f.gap = True   # the other writer's message: somewhere after our last one
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
        f.error, f.gap = self.held(), True

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

    def feed_own(self, f: Flight, seq: int, tick: Tick) -> bool:
        return self._feed(f.subject, seq, tick.data, f.mutations, tick.transfers)

    def feed_followed(self, subject: str, seq: int, data: bytes) -> bool:
        """Apply a message another writer appended (aotx.runtime.follower), under the lock."""
        return self._feed(subject, seq, data)

    # ---- the hold ----------------------------------------------------------------------------
    async def probe(self) -> bool:
        """Lift a hold once the log is back in sync and has room again; True when no hold is left."""
        async with self.lock:
            if self.unsynced:
                await self.resync()
            elif self.hold.active and await has_room(self.connection, self.hold, 4 * MSG_OVERHEAD + 1):
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
    async def resync(self) -> None:
        """Read the log back after the last message applied — every subject, in stream order, as a
        replay's tail — then for each unsynced subject complete a transfer left partial (resend its
        remaining ticks) or drop ticks that never landed. The hold lifts once none is left unsynced."""
        if self.unsynced and not await self.read_back():
            return
        for subject in list(self.unsynced):
            if subject in self.unsynced and not await self._resync_one(self.unsynced[subject]):
                return
        if not self.unsynced:
            self.hold.lift()

    async def read_back(self, upto: int | None = None) -> bool:
        """Apply what the log holds after the last message applied (up to stream sequence `upto`, or
        all of it), every subject in stream order. False when the log did not answer (the hold's
        last error says why) or applying failed (stopped)."""
        if STATS.on:
            before, t0 = self.applied_seq(), clock()
            try:
                return await self._read_back(upto)
            finally:
                STATS.add("readback_s", clock() - t0)
                STATS.add("readbacks")
                STATS.add("readback_msgs", self.applied_seq() - before)
        return await self._read_back(upto)

    async def _read_back(self, upto: int | None) -> bool:
        try:
            recorder = await self.connection.ensure()
            async with aclosing(recorder.read_batches(self.applied_seq() + 1)) as batches:   # (subject, seq, data)
                async for messages in batches:
                    for subject, seq, data in messages:
                        if upto is not None and seq > upto:
                            return True
                        if seq > self.applied_seq() and not self._feed(subject, seq, data):
                            return False
        except Exception as exc:  # server still away: stay on hold, try again on the next mutation
            self.hold.last_error = f"read-back: {type(exc).__name__}: {exc}"
            return False
        return True

    async def _resync_one(self, u: Unsynced) -> bool:
        assert self.projector is not None
        proj = self.projector
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
        try:
            await self._appended(await self.connection.ensure(), [f])
        except Exception as exc:
            self.unknown(f, exc)
            if not self._appending:
                await self.connection.drop()
        if not all(self._feed(f.subject, seq, tick.data, own=tick.transfers) for seq, tick in f.landed):
            return False
        if f.conflict:
            await self.resync()
        return f.error is None


def _size(ticks: list[Tick]) -> int:
    return sum(len(t.data) for t in ticks)
