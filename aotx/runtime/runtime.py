"""SharedRuntime: the one writer of the shared state.

Per command, under one asyncio lock: parse → decide (pure) → encode the events as transfers →
Emitter ticks (≤ 16 records each) → recorder.append with Nats-Msg-Id and the expected last
subject sequence → only on the ack, feed the acknowledged tick to the Projector, which applies
it exactly as boot replay does. Nothing changes state except an acknowledged journal message.

Journal hold (HoldStatus): JournalFull / JournalUnavailable put the runtime on hold: a new
mutation answers 429 and changes nothing; reads, exact retries and refusals keep working. While
on hold each new mutation first probes the log (stream_info; for a write whose outcome is
unknown, a read-back of the lineage's subject) and the hold lifts once space returns and the
log is in sync again. A command whose first tick was refused definitively changes nothing; a
write without an ack is resolved by reading the log back: landed ticks are applied, a transfer
left partial is completed with its remaining ticks, unlanded ones are dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from tqdm import tqdm

from eventlog import (ConcurrencyConflict, JetStreamRecorder, JournalFull, JournalHold, MessageTooLarge, Recorder,
                      StreamSpec)

from ..journal import Emitter, Tick, TransferKind, lineage_hash
from ..state import (Accepted, Capacities, Command, decide, MalformedMutation, MutationKind, Refusal, Replayed, State,
                     encode_event, parse_json_body, parse_mutation, receipt_json, state_hash, transfer_kind)
from ..state.rights import Actor
from .hold import HoldStatus
from .outcome import Outcome
from .replay import TICK_KIND, Projector, ReplayError, boot_control_body
from .views import run_view

log = logging.getLogger("aotx.runtime")
_MSG_OVERHEAD = 128   # per-message store overhead assumed when predicting whether a tick fits
_REPLAY_BATCH = 256   # journal messages fed to the projector at once during boot


@dataclass
class _Unsynced:
    """A command's ticks whose landing is unknown (no ack) or partial."""

    subject: str
    lineage_hash: int
    ticks: list[Tick]


class SharedRuntime:
    """Construct, `await start()` (connects if given a URL, then boots by replay), use, `await stop()`."""

    def __init__(self, nats_url: str | None = None, spec: StreamSpec | None = None,
                 capacities: Capacities | None = None, *, recorder: Recorder | None = None,
                 timeout: float = 5.0, progress: bool = True, boot_id: str | None = None,
                 probe_interval: float = 1.0) -> None:
        if (nats_url is None) == (recorder is None):
            raise ValueError("give exactly one of nats_url or recorder")
        self.nats_url, self.spec = nats_url, spec or StreamSpec()
        self.capacities = capacities or Capacities()
        self.recorder: Recorder | None = recorder
        self._owns_recorder = recorder is None
        self.timeout, self.progress = timeout, progress
        self.boot_id = boot_id or uuid.uuid4().hex
        self.hold = HoldStatus()
        self.projector: Projector | None = None
        self.failed: Optional[str] = None
        self._lock = asyncio.Lock()
        self._unsynced: _Unsynced | None = None
        self._attempt = 0
        self._max_bytes: int | None = None
        self.probe_interval = probe_interval
        self._prober: asyncio.Task | None = None

    # ---- lifecycle ----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.projector is not None

    async def start(self) -> "SharedRuntime":
        if self.started:
            return self
        await self._ensure_recorder()
        try:
            self.projector = await self._replay()
        except BaseException:
            await self.stop()  # fail closed: no state, no connection left behind
            raise
        self._prober = asyncio.get_running_loop().create_task(self._probe_loop())
        log.info("shared runtime booted", extra={"fields": {
            "boot": self.boot_id, "messages": self.projector.messages, "transfers": self.projector.transfers}})
        return self

    async def stop(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            try:
                await self._prober
            except asyncio.CancelledError:
                pass
            self._prober = None
        if self.recorder is not None and self._owns_recorder:
            await self.recorder.close()
            self.recorder = None

    async def _replay(self) -> Projector:
        """Boot: every journal message through the recovery Reassembler and the same apply."""
        assert self.recorder is not None
        info = await self.recorder.stream_info()
        self._max_bytes = info.max_bytes
        proj = Projector(source=info.name, incarnation=info.created.isoformat(), capacities=self.capacities)
        with tqdm(total=info.messages, desc="aotx journal replay", unit="msg", file=sys.stderr,
                  disable=not self.progress, leave=False) as bar:
            batch: list[tuple[str, int, bytes]] = []
            async for msg in self.recorder.read(1):
                batch.append((msg.subject, msg.seq, msg.data))
                if len(batch) >= _REPLAY_BATCH:
                    bar.update(proj.feed_many(batch))
                    batch.clear()
            bar.update(proj.feed_many(batch))
        proj.finish()
        return proj

    async def probe(self) -> bool:
        """Lift a hold once the log is back in sync and has room again; True when no hold is left."""
        async with self._lock:
            if self._unsynced is not None:
                await self._resync()
            elif self.hold.active:
                try:
                    room = await self._has_room()
                except Exception as exc:  # the log does not answer: the hold stays
                    self.hold.last_error = f"stream_info: {type(exc).__name__}: {exc}"
                    room = False
                if room:
                    self.hold.lift()
            return not self.hold.active

    async def _has_room(self) -> bool:
        assert self.recorder is not None
        info = await self.recorder.stream_info()
        return info.max_bytes is None or info.bytes + 4 * _MSG_OVERHEAD < info.max_bytes

    async def _probe_loop(self) -> None:
        while True:
            await asyncio.sleep(self.probe_interval)
            if self.hold.active and not self.failed:
                try:
                    await self.probe()
                except Exception as exc:  # keep probing; the hold stays on
                    self.hold.last_error = f"probe: {type(exc).__name__}: {exc}"

    # ---- reads -------------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        if self.projector is None:
            raise RuntimeError("shared runtime not started")
        return self.projector.state

    def state_hash(self) -> str:
        return state_hash(self.state)

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        """A named read (views.VIEWS) of the current state."""
        return run_view(self.state, view, actor, args)

    async def describe(self) -> dict[str, Any]:
        """What /capabilities reports of the runtime: its limits and its journal status."""
        return {"limits": dataclasses.asdict(self.capacities), "journal": self.journal_status()}

    def journal_status(self) -> dict[str, Any]:
        out = self.hold.json()
        out.update({"source": self.projector.source if self.projector else None,
                    "incarnation": self.projector.incarnation if self.projector else None,
                    "boot": self.boot_id, "failed": self.failed})
        return out

    # ---- the write path --------------------------------------------------------------------------
    async def submit(self, actor: Actor, kind: MutationKind, raw: bytes, space: str | None = None) -> Outcome:
        """One mutation from raw body bytes (+ the route's space). 400 for malformed input."""
        try:
            mutation = parse_mutation(kind, parse_json_body(raw), space)
        except MalformedMutation as exc:
            return Outcome.error(400, "invalid_request", str(exc))
        async with self._lock:
            if self.failed:
                return Outcome.error(503, "runtime_failed", f"the shared runtime stopped: {self.failed}")
            if self._unsynced is not None:
                await self._resync()
                if self._unsynced is not None:
                    return self._held()
            decision = decide(self.state, Command(actor, mutation))
            if isinstance(decision, Refusal):
                return Outcome.refusal(decision)
            if isinstance(decision, Replayed):
                return Outcome(200, receipt_json(self.state, decision.slot))
            return await self._commit(decision)

    def _held(self) -> Outcome:
        h = self.hold
        return Outcome.error(429, "journal_hold",
                             f"the journal is on hold ({h.reason}): {h.last_error}; pending bytes "
                             f"{h.pending_bytes}; nothing was changed, retry later with the same input")

    async def _commit(self, decision: Accepted) -> Outcome:
        assert self.projector is not None and self.recorder is not None
        lineage = decision.events[0].op.lineage
        lh = lineage_hash(lineage)
        subject = self.spec.subject(lineage.hex(), TICK_KIND)
        emitter = Emitter(lh, next_transfer_id=self.projector.last_transfer.get(lh, 0) + 1)
        if self.projector.boots.get(lh) != self.boot_id:
            emitter.submit(TransferKind.CONTROL, boot_control_body(self.boot_id))
        for event in decision.events:
            emitter.submit_payload(transfer_kind(event), encode_event(event))
        ticks = emitter.drain()
        if self.hold.active and not await self._fits(ticks):
            return self._held()
        self._attempt += 1
        refused = await self._append(subject, lh, ticks)
        if refused is not None:
            return refused
        self.hold.lift()
        op = decision.events[-1].op
        slot = self.state.receipt_slot(op.lineage, op.sequence)
        if slot is None:  # an acknowledged tick that did not apply: never continue on a guess
            self.failed = f"acknowledged operation {decision.operation} has no receipt after apply"
            return Outcome.error(503, "runtime_failed", self.failed)
        return Outcome(decision.status, receipt_json(self.state, slot))

    async def _fits(self, ticks: list[Tick]) -> bool:
        """Probe while on hold: does the stream answer, and is there room for these ticks?"""
        assert self.recorder is not None
        try:
            info = await self.recorder.stream_info()
        except Exception as exc:  # any failure to answer keeps the hold
            self.hold.last_error = f"stream_info: {type(exc).__name__}: {exc}"
            return False
        self._max_bytes = info.max_bytes
        need = sum(len(t.data) + _MSG_OVERHEAD for t in ticks)
        return info.max_bytes is None or info.bytes + need <= info.max_bytes

    async def _append(self, subject: str, lh: int, ticks: list[Tick], *,
                      continuation: bool = False) -> Outcome | None:
        """Append the ticks in order, feeding each acked one to the projector. None when all landed."""
        assert self.projector is not None and self.recorder is not None
        for i, tick in enumerate(ticks):
            expected = self.projector.last_subject_seq.get(subject, 0)
            msg_id = f"{tick.msg_id}-{self.boot_id[:12]}-{self._attempt}"
            try:
                ack = await self.recorder.append(subject, tick.data, msg_id=msg_id,
                                                 expected_last_subject_seq=expected)
            except JournalFull as exc:
                rest, partial = ticks[i:], i > 0 or continuation
                self.hold.begin("full", str(exc), pending_bytes=sum(len(t.data) for t in rest) if partial else 0,
                                unsynced=partial)
                if partial:  # part of a transfer is in the log: keep the rest to complete it
                    self._unsynced = _Unsynced(subject, lh, rest)
                return self._held()
            except JournalHold as exc:  # JournalUnavailable: the write may or may not have landed
                self.hold.begin("unavailable", str(exc), pending_bytes=sum(len(t.data) for t in ticks[i:]),
                                unsynced=True)
                self._unsynced = _Unsynced(subject, lh, ticks[i:])
                await self._drop_connection()
                return self._held()
            except ConcurrencyConflict as exc:
                self._unsynced = _Unsynced(subject, lh, ticks[i:] if i or continuation else [])
                await self._resync()
                return Outcome.error(409, "conflict", f"another writer appended to this lineage ({exc}); "
                                     "read /participant and retry")
            except MessageTooLarge as exc:
                if i == 0 and not continuation:
                    return Outcome.error(413, "too_large", str(exc))
                self.failed = f"tick {i} of a command is too large after earlier ticks landed: {exc}"
                return Outcome.error(503, "runtime_failed", self.failed)
            if ack.duplicate:
                self.failed = f"journal answered a fresh message id {msg_id} as a duplicate (seq {ack.seq})"
                return Outcome.error(503, "runtime_failed", self.failed)
            if not self._feed(subject, ack.seq, tick.data):
                return Outcome.error(503, "runtime_failed", self.failed or "journal apply failed")
        return None

    async def _drop_connection(self) -> None:
        """After a write without an ack, close our connection: the client library would otherwise
        re-send its buffered publish whenever it reconnects, after the read-back decided it was lost.
        A fresh connection is opened by the read-back. A recorder given to us is kept (its owner decides)."""
        if not self._owns_recorder or self.recorder is None:
            return
        recorder, self.recorder = self.recorder, None
        try:
            await recorder.close()
        except Exception as exc:  # closing a broken connection may fail; it is gone either way
            log.debug("closing the journal connection failed: %s", exc)

    async def _ensure_recorder(self) -> Recorder:
        if self.recorder is None:
            # bounded: the client library retries an unreachable server forever on its own
            self.recorder = await asyncio.wait_for(
                JetStreamRecorder.connect(self.nats_url, self.spec, timeout=self.timeout,
                                          name=f"aotx-runtime-{self.boot_id[:8]}"),
                timeout=max(4 * self.timeout, 2.0) if self.projector is not None else None)
        return self.recorder

    def _feed(self, subject: str, seq: int, data: bytes) -> bool:
        assert self.projector is not None
        try:
            self.projector.feed(subject, seq, data)
        except ReplayError as exc:
            self.failed = str(exc)
            log.error("shared runtime stopped: %s", exc)
            return False
        return True

    async def _resync(self) -> None:
        """Read back the lineage's subject after the last known message, apply what landed, then
        complete a transfer left partial (resend its remaining ticks) or drop ticks that never landed."""
        assert self.projector is not None and self._unsynced is not None
        u, proj = self._unsynced, self.projector
        try:
            await self._ensure_recorder()
            assert self.recorder is not None
            start = proj.last_subject_seq.get(u.subject, 0) + 1
            async for msg in self.recorder.read(start, subject=u.subject):
                if not self._feed(msg.subject, msg.seq, msg.data):
                    return
        except Exception as exc:  # server still away: stay on hold, try again on the next mutation
            self.hold.last_error = f"read-back: {type(exc).__name__}: {exc}"
            return
        last = proj.last_transfer.get(u.lineage_hash, 0)
        open_parts = proj.open_parts(u.lineage_hash)
        rest: list[Tick] = []
        if open_parts:  # a transfer is partial in the log: it must be completed, never dropped
            open_tid = next(t for h, t, _, _ in proj.reassembler.open_transfers if h == u.lineage_hash)
            rest = [t for t in u.ticks if t.first >= (open_tid, open_parts)]
            if not rest or rest[0].first != (open_tid, open_parts):
                self.failed = (f"journal read-back leaves transfer {open_tid} partial at part {open_parts}, "
                               "which no unacknowledged tick continues")
                return
        # else: every transfer in the log is complete; ticks that did not land are dropped (nothing changed)
        self._unsynced = None
        if rest:
            self._attempt += 1
            if await self._append(u.subject, u.lineage_hash, rest, continuation=True) is not None:
                return
        self.hold.lift()

