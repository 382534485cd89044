"""SharedRuntime: the one writer of the shared state.

Group commit, one writer: a command is parsed by its caller and queued; the writer takes every
command queued while the previous batch was in flight and, under one asyncio lock, decides them
in order (pure `decide`) against the pending state (the acknowledged state plus the batch's
accepted events), encodes each lineage's events as transfers in Emitter ticks (≤ 16 records
each), and appends every tick once with Nats-Msg-Id and the expected last subject sequence —
a lineage's ticks in order, different lineages (subjects) in parallel. Only the acknowledged
ticks are fed to the Projector, in stream order, which applies them exactly as boot replay does;
nothing changes state except an acknowledged journal message. A command is answered after the
ack of the tick that completes it; a failed or held append answers every command of its
lineage's remaining ticks with that refusal, and nothing of them is applied. A command whose
decision would read what another lineage's command of the same batch changed waits for the next
batch, and refusals or retries decided on a pending state are decided again if anything of the
batch failed.

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
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from tqdm import tqdm

from eventlog import (ConcurrencyConflict, JetStreamRecorder, JournalFull, JournalHold, MessageTooLarge, NatsAuth,
                      OutageLog, Recorder, StreamSpec)

from ..journal import Emitter, Tick, TransferKind, lineage_hash
from ..memory import MemoryOp, MemoryRetained, MemoryStore, decide_publication, encode_memory_event, memory_event_body
from ..state import (Accepted, CancelInput, Capacities, Command, ConversationCreated, CreateConversation,
                     InputCancelled, MalformedMutation, MemberRightsSet, MutationKind, PublishMemory,
                     ParticipantRegistered, ReceiptsRetired, Refusal, SetMemberRights, SpaceCreated, State, StateError,
                     SubmitInput, decide, encode_event, lineage_for, parse_json_body, parse_mutation, receipt_json,
                     state_hash, transfer_kind)
from ..state.execution import TRANSFER_KIND, InputCompleted, execution_body
from ..state.vocab import Execution
from ..state.apply import apply_into, owned_copy
from ..state.rights import Actor, Grants
from .hold import HoldStatus
from .outcome import Outcome
from .replay import TICK_KIND, Projector, ReplayError, boot_control_body
from .executor import DEFAULT_DEADLINE_SECONDS, Executor, execution_context
from .stopping import cancel_and_wait
from .views import run_view

log = logging.getLogger("aotx.runtime")
_MSG_OVERHEAD = 128   # per-message store overhead assumed when predicting whether a tick fits
_REPLAY_BATCH = 256   # journal messages fed to the projector at once during boot


_MAX_BATCH = 64      # commands decided together (their ticks: ≤ 16 records each, one append per tick)


@dataclass
class _Unsynced:
    """A subject's ticks whose landing is unknown (no ack) or partial."""

    subject: str
    lineage_hash: int
    ticks: list[Tick]


@dataclass(eq=False)
class _Cmd:
    """A queued command, its decision, and where its last transfer completes among its lineage's ticks."""

    actor: Actor
    mutation: Any
    future: asyncio.Future
    lineage: bytes = b""
    decision: Any = None
    last_tid: int = 0
    tick: int = -1


@dataclass(eq=False)
class _Flight:
    """One lineage's accepted commands of a batch and their ticks, appended in order on its subject."""

    cmds: list[_Cmd] = field(default_factory=list)
    subject: str = ""
    lh: int = 0
    ticks: list[Tick] = field(default_factory=list)
    landed: list[tuple[int, Tick]] = field(default_factory=list)   # (stream sequence, tick), acked
    error: Optional[Outcome] = None
    conflict: bool = False


def _answer(cmd: _Cmd, outcome: Outcome) -> None:
    if not cmd.future.done():
        cmd.future.set_result(outcome)


def _answer_all(cmds: list[_Cmd], outcome: Outcome) -> None:
    for cmd in cmds:
        _answer(cmd, outcome)


def _touch(touched: dict[tuple, bytes], lineage: bytes, events) -> None:
    """Note what an accepted, unacknowledged command changes that another lineage's decision could read."""
    for e in events:
        if isinstance(e, ParticipantRegistered):
            touched[("participant", lineage)] = lineage
        elif isinstance(e, SpaceCreated):
            touched[("space", lineage + e.space)] = lineage
        elif isinstance(e, MemberRightsSet):
            touched[("space", e.space_lineage + e.space)] = lineage
        elif isinstance(e, ReceiptsRetired):
            touched[("receipts freed",)] = lineage
        elif isinstance(e, ConversationCreated):
            touched[("conversation", lineage + e.conversation)] = lineage


_ROWS = ("receipts", "participants", "spaces", "conversations", "members")
_TAKES = {ParticipantRegistered: "participants", SpaceCreated: "spaces", MemberRightsSet: "members",
          ConversationCreated: "conversations"}


def _consume(consumed: dict[str, int], events) -> None:
    """At most one receipt and one table row per event (a member row counted even when it exists)."""
    for e in events:
        consumed["receipts"] += 1
        table = _TAKES.get(type(e))
        if table is not None:
            consumed[table] += 1


def _headroom(state: State, consumed: dict[str, int]) -> bool:
    """Does every table keep a free row after the pending commands took theirs? Then each of
    decide's "table full" checks answers the same on the acknowledged and on the pending state."""
    caps = state.capacities
    return (state.free_receipts() > consumed["receipts"]
            and state.n_participants + consumed["participants"] < caps.participants
            and state.n_spaces + consumed["spaces"] < caps.spaces
            and state.n_conversations + consumed["conversations"] < caps.conversations
            and state.n_members + consumed["members"] < caps.members)


def _depends(cmd: _Cmd, touched: dict[tuple, bytes]) -> bool:
    """Would the decision read something another lineage's unacknowledged command of this batch
    changed? Then it waits for the next batch, so that no tick in flight relies on another that
    may fail. (Table capacities only shrink under pending commands: deciding on them is safe.)"""
    def other(key: tuple) -> bool:
        owner = touched.get(key)
        return owner is not None and owner != cmd.lineage
    if other(("receipts freed",)):
        return True
    m = cmd.mutation
    if isinstance(m, SetMemberRights):
        return other(("space", m.space.lineage + m.space.ident)) or other(("participant", m.participant.lineage))
    if isinstance(m, CreateConversation):
        return other(("space", m.space.lineage + m.space.ident))
    if isinstance(m, PublishMemory):  # reads the destination and the object's own space: any space counts
        return any(other(key) for key in touched if key[0] in ("space", "participant"))
    if isinstance(m, (SubmitInput, CancelInput)):  # its space is only known from the state: any space counts
        return (other(("conversation", m.conversation.lineage + m.conversation.ident))
                or any(other(key) for key in touched if key[0] in ("space", "participant")))
    return False


class SharedRuntime:
    """Construct, `await start()` (connects if given a URL, then boots by replay), use, `await stop()`."""

    def __init__(self, nats_url: str | None = None, spec: StreamSpec | None = None,
                 capacities: Capacities | None = None, *, recorder: Recorder | None = None,
                 timeout: float = 5.0, progress: bool = True, boot_id: str | None = None,
                 probe_interval: float = 1.0, service: Any = None,
                 execution_deadline: float = DEFAULT_DEADLINE_SECONDS, retention_mode: int = 1,
                 lease_revision: int = 3, automatic_memory: bool = False, embedder: Any = None,
                 nats_auth: NatsAuth | None = None, snapshots: Any = None) -> None:
        if (nats_url is None) == (recorder is None):
            raise ValueError("give exactly one of nats_url or recorder")
        self.nats_url, self.spec = nats_url, spec or StreamSpec()
        self.nats_auth = nats_auth   # credentials for nats_url (eventlog.NatsAuth); never logged
        self.capacities = capacities or Capacities()
        self.recorder: Recorder | None = recorder
        self._owns_recorder = recorder is None
        self.snapshots = None   # aotx.snapshot.SnapshotKeeper of `snapshots` (a SnapshotPolicy; None: off)
        if snapshots is not None and nats_url is not None:
            from ..snapshot import SnapshotKeeper   # not at the top: aotx.snapshot imports this package's projector
            self.snapshots = SnapshotKeeper(nats_url, nats_auth, self.spec, self.capacities, snapshots)
        self.timeout, self.progress = timeout, progress
        self.boot_id = boot_id or uuid.uuid4().hex
        # one outage of the journal connection is one log line, across the fresh connections we open
        self._outage = OutageLog(log, f"aotx-runtime-{self.boot_id[:8]}", nats_url)
        self.hold = HoldStatus()
        self.projector: Projector | None = None
        self.failed: Optional[str] = None
        self._lock = asyncio.Lock()
        self._unsynced: dict[str, _Unsynced] = {}     # subject -> ticks whose landing is unknown or partial
        self._queue: deque[_Cmd] = deque()
        self._writer: asyncio.Task | None = None
        self._exec_queue: list = []                   # (lineage, events, future) for the next execution round
        self._exec_writer: asyncio.Task | None = None
        self._drop_after = False
        self._attempt = 0
        self._max_bytes: int | None = None
        self.probe_interval = probe_interval
        self._prober: asyncio.Task | None = None
        self.service = None
        self.context = None
        self.executor: Executor | None = None
        self._changed: asyncio.Event | None = None
        if not execution_deadline > 0:
            raise ValueError(f"execution_deadline must be positive, got {execution_deadline!r}")
        self.execution_deadline = float(execution_deadline)
        if retention_mode not in (1, 2):
            raise ValueError(f"retention_mode must be 1 or 2, got {retention_mode!r}")
        if lease_revision not in (3, 4, 5):
            raise ValueError(f"lease_revision must be 3, 4 or 5 (the revisions new leases use), got {lease_revision!r}")
        # what the deployment asks for; the recorded mode is 2 only where the model is qualified
        self.retention_mode, self.lease_revision = int(retention_mode), int(lease_revision)
        self.automatic_memory = bool(automatic_memory)   # the served model's automatic-memory qualification
        self.embedder = embedder
        # an input author's current grants (lineage → Grants), read when his input recalls memory;
        # a bare runtime trusts its callers' actors and has none of its own: membership alone decides
        # (GrantedRuntime puts the deployment grant file's here)
        self.author_grants: Callable[[bytes], Grants] = lambda lineage: Grants.all()
        if service is not None:
            self.attach_service(service)

    def attach_service(self, service: Any) -> None:
        """Run inputs with this ModelService (the same engine and KV pool as the stateless surfaces).
        Without one, the runtime refuses inputs (409)."""
        self.service = service
        if self.embedder is None:  # memory input needs the text embedding model: load it now, not at the first input
            from .executor import default_embedder
            self.embedder = default_embedder()
        self.context = execution_context(service, self.automatic_memory)
        self.executor = Executor(self, service, self.execution_deadline, embedder=self.embedder)

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
        await self._interrupt_unfinished()
        self._prober = asyncio.get_running_loop().create_task(self._probe_loop())
        log.info("shared runtime booted", extra={"fields": {
            "boot": self.boot_id, "messages": self.projector.messages, "transfers": self.projector.transfers}})
        return self

    async def _interrupt_unfinished(self) -> None:
        """Boot: an admission without a completion (this runtime never runs it again) is journalled
        `interrupted`, so its receipt gets a saved terminal result."""
        state = self.state
        unfinished = []
        for slot, record in enumerate(state.executions):
            if record is None or record.status.terminal:
                continue
            row = state.receipts[slot]
            unfinished.append((row["lineage"].tobytes(), int(row["sequence"])))
        failures = await asyncio.gather(*(self.journal_execution(lineage, [InputCompleted(
            lineage, sequence, Execution.INTERRUPTED, output_tokens=0, finish="interrupted",
            error="the runtime restarted before this input finished; it is not executed again")])
            for lineage, sequence in unfinished))
        for (lineage, sequence), failure in zip(unfinished, failures):
            if failure is not None:
                log.warning("could not journal input %s/%d as interrupted: %s", lineage.hex(), sequence, failure.body)

    async def journal_execution(self, lineage: bytes, events: list) -> Outcome | None:
        """Append execution transfers (lease, memory, output, completion) on a lineage's subject and
        apply them once acknowledged. None when all landed, else the refusal.

        Group commit, as for commands: every call queued while a round was in flight joins the next
        round, whose transfers are packed per lineage into shared ticks (≤ 16 records each) and
        appended in order under the writer's lock — one append and one fsync for many inputs' output."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._exec_queue.append((lineage, list(events), fut))
        if self._exec_writer is None or self._exec_writer.done():
            self._exec_writer = loop.create_task(self._exec_loop())
        return await fut

    async def _exec_loop(self) -> None:
        while self._exec_queue:
            batch, self._exec_queue = self._exec_queue, []
            try:
                async with self._lock:
                    await self._journal_round(batch)
            except BaseException as exc:
                for _, _, fut in batch:
                    if not fut.done():
                        if isinstance(exc, Exception):
                            fut.set_exception(exc)
                        else:
                            fut.cancel()
                if not isinstance(exc, Exception):
                    raise
                log.exception("shared runtime execution journal round failed")

    async def _journal_round(self, batch: list) -> None:
        """One round of execution transfers: per lineage one Emitter (a boot control record first when
        this boot has not written the lineage yet), ticks appended in order; a call is answered None
        when the tick completing its last transfer landed, else with the failure."""
        def answer(items, outcome):
            for _, _, fut in items:
                if not fut.done():
                    fut.set_result(outcome)

        assert self.projector is not None
        refused = await self._unready()
        if refused is not None:
            return answer(batch, refused)
        if self.recorder is None:
            await self._ensure_recorder()
        proj = self.projector
        by_lineage: dict[bytes, list] = {}
        for item in batch:
            by_lineage.setdefault(item[0], []).append(item)
        plans = []
        for lineage, items in by_lineage.items():
            lh = lineage_hash(lineage)
            emitter = Emitter(lh, next_transfer_id=proj.last_transfer.get(lh, 0) + 1)
            if proj.boots.get(lh) != self.boot_id:
                emitter.submit(TransferKind.CONTROL, boot_control_body(self.boot_id))
            last = []
            for _, events, _ in items:
                tid = 0
                for event in events:
                    if isinstance(event, MemoryRetained):
                        tid = emitter.submit(TransferKind.MEMORY, memory_event_body(event))
                    else:
                        tid = emitter.submit(TRANSFER_KIND[type(event)], execution_body(event))
                last.append(tid)
            ticks = emitter.drain()
            where = [next(i for i, t in enumerate(ticks) if tid in t.completes) for tid in last]
            plans.append((lineage, lh, items, ticks, where))
        if self.hold.active and not await self._fits([t for plan in plans for t in plan[3]]):
            return answer(batch, self._held())
        flights = [_Flight(subject=self.spec.subject(lineage.hex(), TICK_KIND), lh=lh, ticks=ticks)
                   for lineage, lh, _, ticks, _ in plans]
        if not await self._append_flights(flights):
            return answer(batch, self._failed_outcome())
        for f, (_, _, items, _, where) in zip(flights, plans):
            for item, at in zip(items, where):
                if not item[2].done():
                    item[2].set_result(None if at < len(f.landed) else (f.error or self._failed_outcome()))
        if all(f.error is None for f in flights) and not self._unsynced:
            self.hold.lift()
        conflicts = [f.subject for f in flights if f.conflict]
        if conflicts:
            await self._resync(conflicts)

    async def wait_change(self, timeout: float) -> None:
        """Return after the next journal message is applied, or after `timeout` seconds."""
        if self._changed is None:
            self._changed = asyncio.Event()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def stop(self) -> None:
        """Stop executing, writing and probing, then close the log; bounded (cancel_and_wait, the
        recorder's bounded close), also when nats-server is gone."""
        if self.executor is not None:
            await self.executor.stop()
        await cancel_and_wait([self._exec_writer], what="execution journal writer")
        for _, _, fut in self._exec_queue:
            if not fut.done():
                fut.set_result(Outcome.error(503, "runtime_failed", "the shared runtime stopped"))
        self._exec_queue = []
        await cancel_and_wait([self._writer], what="command writer")
        while self._queue:
            _answer(self._queue.popleft(), Outcome.error(503, "runtime_failed", "the shared runtime stopped"))
        self._writer = None
        await cancel_and_wait([self._prober], what="journal prober")
        self._prober = None
        if self.snapshots is not None:
            await self.snapshots.close()
        if self.recorder is not None and self._owns_recorder:
            recorder, self.recorder = self.recorder, None
            await recorder.close()

    async def _replay(self) -> Projector:
        """Boot: every journal message through the recovery Reassembler and the same apply."""
        assert self.recorder is not None
        info = await self.recorder.stream_info()
        self._max_bytes = info.max_bytes
        proj = Projector(source=info.name, incarnation=info.created.isoformat(), capacities=self.capacities)
        start = 1
        if self.snapshots is not None:   # the newest valid snapshot and the sequence after it, else a full replay
            proj, start = await self.snapshots.boot(info, proj)
        with tqdm(total=max(info.messages - proj.messages, 0), desc="aotx journal replay", unit="msg",
                  file=sys.stderr, disable=not self.progress, leave=False) as bar:
            batch: list[tuple[str, int, bytes]] = []
            async for msg in self.recorder.read(start):
                batch.append((msg.subject, msg.seq, msg.data))
                if len(batch) >= _REPLAY_BATCH:
                    bar.update(proj.feed_many(batch))
                    batch.clear()
            bar.update(proj.feed_many(batch))
        proj.finish()
        if self.snapshots is not None:
            self.snapshots.booted(proj)
        return proj

    async def probe(self) -> bool:
        """Lift a hold once the log is back in sync and has room again; True when no hold is left."""
        async with self._lock:
            if self._unsynced:
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

    @property
    def memory(self) -> MemoryStore:
        if self.projector is None:
            raise RuntimeError("shared runtime not started")
        return self.projector.memory

    def state_hash(self) -> str:
        """The state's hash combined with the memory store's digest: live = replay covers both."""
        import hashlib
        return hashlib.blake2b(f"{state_hash(self.state)}:{self.memory.digest()}".encode(), digest_size=32).hexdigest()

    def _publisher(self, state: State, actor: Actor, header, m: PublishMemory):
        """A publication's memory part, decided against the acknowledged memory store (publications
        and retentions change it only under the writer's lock, after their ack)."""
        decision = decide_publication(self.memory, state, actor, MemoryOp(header.lineage, header.sequence,
                                                                           header.operation),
                                      str(m.space), m.object, m.source_version)
        return decision if isinstance(decision, Refusal) else encode_memory_event(decision)

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        """A named read (views.VIEWS) of the current state."""
        return run_view(self.state, view, actor, args, self.memory)

    async def describe(self) -> dict[str, Any]:
        """What /capabilities reports of the runtime: its limits and its journal status."""
        ctx = self.context
        execution = None if ctx is None else {
            "page_grant": ctx.page_grant, "lease_revision": self.lease_revision,
            "retention_mode": self.retention_mode, "deadline_seconds": self.execution_deadline,
            "models": [{"id": name, "digest": caps.digest.hex(), "media": caps.media,
                        "automatic_memory": caps.automatic_memory, "context_tokens": caps.context_tokens}
                       for name, caps in sorted(ctx.models.items())]}
        return {"limits": dataclasses.asdict(self.capacities), "journal": self.journal_status(),
                "execution": execution}

    def journal_status(self) -> dict[str, Any]:
        out = self.hold.json()
        out.update({"source": self.projector.source if self.projector else None,
                    "incarnation": self.projector.incarnation if self.projector else None,
                    "boot": self.boot_id, "failed": self.failed})
        return out

    # ---- the write path --------------------------------------------------------------------------
    async def submit(self, actor: Actor, kind: MutationKind, raw: bytes, space: str | None = None) -> Outcome:
        """One mutation from raw body bytes (+ the route's space). 400 for malformed input.

        The command joins the writer's queue and is answered once the batch that holds it is
        resolved: a new operation only after the ack of the tick that completes it."""
        try:
            mutation = parse_mutation(kind, parse_json_body(raw), space)
        except MalformedMutation as exc:
            return Outcome.error(400, "invalid_request", str(exc))
        loop = asyncio.get_running_loop()
        cmd = _Cmd(actor, mutation, loop.create_future())
        self._queue.append(cmd)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_loop())
        # a caller that goes away cancels only its own future, never the writer or the batch
        return await cmd.future

    async def _write_loop(self) -> None:
        """Group commit: every command queued while a batch was in flight forms the next batch."""
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(_MAX_BATCH, len(self._queue)))]
            try:
                async with self._lock:
                    await self._run_batch(batch)
            except BaseException as exc:
                for cmd in batch:
                    if not cmd.future.done():
                        if isinstance(exc, Exception):
                            cmd.future.set_exception(exc)
                        else:
                            cmd.future.cancel()
                if not isinstance(exc, Exception):
                    raise
                log.exception("shared runtime write batch failed")

    def _held(self) -> Outcome:
        h = self.hold
        return Outcome.error(429, "journal_hold",
                             f"the journal is on hold ({h.reason}): {h.last_error}; pending bytes "
                             f"{h.pending_bytes}; nothing was changed, retry later with the same input")

    def _failed_outcome(self) -> Outcome:
        return Outcome.error(503, "runtime_failed", f"the shared runtime stopped: {self.failed}")

    async def _unready(self) -> Outcome | None:
        """Before a write round: the refusal when the runtime stopped, or when the log is still out of
        sync after reading it back (the hold stays); None when the round may write."""
        if self.failed:
            return self._failed_outcome()
        if self._unsynced:
            await self._resync()
            if self._unsynced:
                return self._held()
        return None

    async def _run_batch(self, batch: list["_Cmd"]) -> None:
        """Decide the batch in order against the pending state (the acknowledged state plus the
        batch's accepted events), append each lineage's ticks (≤ 16 records each, one append per
        tick; lineages in parallel), apply what the log acked in stream order, then answer."""
        refused = await self._unready()
        if refused is not None:
            return _answer_all(batch, refused)
        live = self.state
        pending: State | None = None
        unapplied: list = []
        touched: dict[tuple, bytes] = {}
        flights: dict[bytes, _Flight] = {}
        later: list[_Cmd] = []      # refusals / retries decided against a pending state
        requeue: list[_Cmd] = []    # depends on another lineage's unacknowledged command: next batch
        deferred: set[bytes] = set()
        consumed = dict.fromkeys(_ROWS, 0)   # rows the batch's accepted commands may take
        for cmd in batch:
            cmd.lineage = lineage_for(cmd.actor.principal)
            if cmd.lineage in deferred or _depends(cmd, touched):
                deferred.add(cmd.lineage)  # keep a lineage's commands in their order
                requeue.append(cmd)
                continue
            if cmd.lineage not in flights and _headroom(live, consumed):
                # nothing this decision reads differs between the acknowledged and the pending state
                # (its lineage has nothing pending, what it reads of others is not touched, and every
                # table has room left after the pending commands): decide on the acknowledged state,
                # and a refusal or retry is final whatever happens to the batch
                decision = cmd.decision = decide(live, Command(cmd.actor, cmd.mutation, self.context, self._publisher))
                if isinstance(decision, Accepted):
                    flights.setdefault(cmd.lineage, _Flight()).cmds.append(cmd)
                    unapplied.extend(decision.events)
                    _touch(touched, cmd.lineage, decision.events)
                    _consume(consumed, decision.events)
                else:
                    _answer(cmd, self._settled(live, cmd))
                continue
            if unapplied:
                if pending is None:
                    pending = owned_copy(live)
                try:
                    for event in unapplied:
                        apply_into(pending, event)
                except StateError as exc:  # decide accepted what apply refuses: never continue on a guess
                    self.failed = f"an accepted event does not apply to the pending state: {exc}"
                    return _answer_all(batch, self._failed_outcome())
                unapplied.clear()
            decision = decide(live if pending is None else pending,
                              Command(cmd.actor, cmd.mutation, self.context, self._publisher))
            cmd.decision = decision
            if isinstance(decision, Accepted):
                flights.setdefault(cmd.lineage, _Flight()).cmds.append(cmd)
                unapplied.extend(decision.events)
                _touch(touched, cmd.lineage, decision.events)
                _consume(consumed, decision.events)
            elif pending is not None:
                later.append(cmd)
            else:
                _answer(cmd, self._settled(live, cmd))
        if flights:
            await self._fly(flights, batch)
        if later:
            if self.failed or any(f.error is not None for f in flights.values()):
                requeue = later + requeue   # decided on a state that did not all land: decide again
            else:
                for cmd in later:
                    _answer(cmd, self._settled(self.state, cmd))
        if requeue:
            requeue.sort(key=batch.index)
            self._queue.extendleft(reversed(requeue))

    def _settled(self, state: State, cmd: "_Cmd") -> Outcome:
        """The answer to a command decided as a refusal or an exact retry."""
        d = cmd.decision
        if isinstance(d, Refusal):
            return Outcome.refusal(d)
        env = cmd.mutation.envelope
        slot = state.receipt_slot(cmd.lineage, env.sequence)
        if slot is None:
            self.failed = f"retry of operation {d.operation} has no receipt"
            return self._failed_outcome()
        return Outcome(200, receipt_json(state, slot))

    async def _fly(self, flights: dict[bytes, "_Flight"], batch: list["_Cmd"]) -> None:
        assert self.projector is not None and self.recorder is not None
        proj = self.projector
        for lineage, f in flights.items():
            f.lh = lh = lineage_hash(lineage)
            f.subject = self.spec.subject(lineage.hex(), TICK_KIND)
            emitter = Emitter(lh, next_transfer_id=proj.last_transfer.get(lh, 0) + 1)
            if proj.boots.get(lh) != self.boot_id:
                emitter.submit(TransferKind.CONTROL, boot_control_body(self.boot_id))
            for cmd in f.cmds:
                for event in cmd.decision.events:
                    cmd.last_tid = emitter.submit_payload(transfer_kind(event), encode_event(event))
            f.ticks = emitter.drain()
            for cmd in f.cmds:
                cmd.tick = next(i for i, t in enumerate(f.ticks) if cmd.last_tid in t.completes)
        if self.hold.active and not await self._fits([t for f in flights.values() for t in f.ticks]):
            for f in flights.values():
                f.error = self._held()
                _answer_all(f.cmds, f.error)
            return
        if not await self._append_flights(list(flights.values())):
            return _answer_all(batch, self._failed_outcome())
        state = self.state
        answers: list[tuple[_Cmd, Outcome]] = []
        for f in flights.values():
            for cmd in f.cmds:
                if cmd.tick >= len(f.landed):
                    answers.append((cmd, f.error or self._failed_outcome()))
                    continue
                op = cmd.decision.events[-1].op
                slot = state.receipt_slot(op.lineage, op.sequence)
                if slot is None:  # an acknowledged tick that did not apply: never continue on a guess
                    self.failed = f"acknowledged operation {cmd.decision.operation} has no receipt after apply"
                    return _answer_all(batch, self._failed_outcome())
                answers.append((cmd, Outcome(cmd.decision.status, receipt_json(state, slot))))
        if all(f.error is None for f in flights.values()):
            self.hold.lift()
        conflicts = [f.subject for f in flights.values() if f.conflict]
        if conflicts:  # read the other writer's messages back before answering 409
            await self._resync(conflicts)
        for cmd, outcome in answers:
            _answer(cmd, outcome)

    async def _append_flights(self, flights: list["_Flight"]) -> bool:
        """Append each lineage's ticks (lineages in parallel, each in order), then feed every
        acknowledged tick to the projector in stream order, exactly as a replay would. False when
        feeding failed (the runtime stopped); a flight that did not fully land has `error` set."""
        self._attempt += 1
        self._drop_after = False
        if len(flights) == 1:  # one lineage: no task per flight
            try:
                results: list = [await self._append_flight(flights[0])]
            except Exception as exc:
                results = [exc]
        else:
            results = await asyncio.gather(*(self._append_flight(f) for f in flights), return_exceptions=True)
        for f, result in zip(flights, results):
            if isinstance(result, BaseException):  # not a mapped journal error: its outcome is unknown
                if not isinstance(result, Exception):
                    raise result
                rest = f.ticks[len(f.landed):]
                self.hold.begin("unavailable", f"append: {type(result).__name__}: {result}",
                                pending_bytes=sum(len(t.data) for t in rest), unsynced=True)
                self._unsynced[f.subject] = _Unsynced(f.subject, f.lh, rest)
                self._drop_after = True
                f.error = self._held()
        if self._drop_after:
            await self._drop_connection()
        landed = sorted((seq, f.subject, tick.data) for f in flights for seq, tick in f.landed)
        for seq, subject, data in landed:
            if not self._feed(subject, seq, data):
                return False
        return True

    async def _append_flight(self, f: "_Flight") -> None:
        """Append one lineage's ticks in order (each expecting the previous one's sequence); the
        acked ones are kept in `f.landed` and applied by the caller. Stops at the first failure."""
        assert self.projector is not None and self.recorder is not None
        for i, tick in enumerate(f.ticks):
            expected = f.landed[-1][0] if f.landed else self.projector.last_subject_seq.get(f.subject, 0)
            msg_id = f"{tick.msg_id}-{self.boot_id[:12]}-{self._attempt}"
            try:
                ack = await self.recorder.append(f.subject, tick.data, msg_id=msg_id,
                                                 expected_last_subject_seq=expected)
            except JournalFull as exc:
                rest, partial = f.ticks[i:], i > 0
                self.hold.begin("full", str(exc), pending_bytes=sum(len(t.data) for t in rest) if partial else 0,
                                unsynced=partial)
                if partial:  # part of a transfer may be in the log: keep the rest to complete it
                    self._unsynced[f.subject] = _Unsynced(f.subject, f.lh, rest)
                f.error = self._held()
                return
            except JournalHold as exc:  # JournalUnavailable: the write may or may not have landed
                self.hold.begin("unavailable", str(exc), pending_bytes=sum(len(t.data) for t in f.ticks[i:]),
                                unsynced=True)
                self._unsynced[f.subject] = _Unsynced(f.subject, f.lh, f.ticks[i:])
                self._drop_after = True   # after every append of the batch has its answer
                f.error = self._held()
                return
            except ConcurrencyConflict as exc:
                self._unsynced[f.subject] = _Unsynced(f.subject, f.lh, f.ticks[i:] if i else [])
                f.conflict = True
                f.error = Outcome.error(409, "conflict", f"another writer appended to this lineage ({exc}); "
                                        "read /participant and retry")
                return
            except MessageTooLarge as exc:
                if i == 0:
                    f.error = Outcome.error(413, "too_large", str(exc))
                    return
                self.failed = f"tick {i} of a command is too large after earlier ticks landed: {exc}"
                f.error = self._failed_outcome()
                return
            if ack.duplicate:
                self.failed = f"journal answered a fresh message id {msg_id} as a duplicate (seq {ack.seq})"
                f.error = self._failed_outcome()
                return
            f.landed.append((ack.seq, tick))

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
        """Append the ticks in order, feeding each acked one to the projector. None when all landed.
        (The read-back path: completing a transfer left partial.)"""
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
                    self._unsynced[subject] = _Unsynced(subject, lh, rest)
                return self._held()
            except JournalHold as exc:  # JournalUnavailable: the write may or may not have landed
                self.hold.begin("unavailable", str(exc), pending_bytes=sum(len(t.data) for t in ticks[i:]),
                                unsynced=True)
                self._unsynced[subject] = _Unsynced(subject, lh, ticks[i:])
                await self._drop_connection()
                return self._held()
            except ConcurrencyConflict as exc:
                self._unsynced[subject] = _Unsynced(subject, lh, ticks[i:] if i or continuation else [])
                await self._resync([subject])
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
                                          name=f"aotx-runtime-{self.boot_id[:8]}", auth=self.nats_auth,
                                          outage=self._outage),
                timeout=max(4 * self.timeout, 2.0) if self.projector is not None else None)
        return self.recorder

    def _feed(self, subject: str, seq: int, data: bytes) -> bool:
        assert self.projector is not None
        try:
            done = self.projector.feed(subject, seq, data)
        except ReplayError as exc:
            self.failed = str(exc)
            log.error("shared runtime stopped: %s", exc)
            return False
        if self.snapshots is not None:   # a snapshot when due: encoded now (a consistent point), saved later
            self.snapshots.fed(self.projector, seq)
        if self.executor is not None:
            self._after_saved(done)
        if self._changed is not None:  # wake every reader waiting for new state (SSE streams)
            self._changed.set()
            self._changed = None
        return True

    def _after_saved(self, transfers) -> None:
        """Live (never at boot): an admission is saved → start its execution; a cancellation is
        saved → stop its target. Whether the ack came back or a read-back found it landed."""
        assert self.executor is not None
        for t in transfers:
            body = t.body
            if t.kind == TransferKind.ADMISSION:
                self.executor.start(body["lineage"], body["sequence"])
            elif t.kind == TransferKind.MUTATION and body.get("kind") == InputCancelled.KIND:
                self.executor.cancel(body["lineage"], body["target_sequence"])

    async def _resync(self, subjects: list[str] | None = None) -> None:
        """For each unsynced subject (all, or those named): read it back after the last known message,
        apply what landed, then complete a transfer left partial (resend its remaining ticks) or drop
        ticks that never landed. The hold lifts once no subject is left unsynced."""
        assert self.projector is not None
        for subject in list(self._unsynced) if subjects is None else subjects:
            if subject in self._unsynced and not await self._resync_one(self._unsynced[subject]):
                return
        if not self._unsynced:
            self.hold.lift()

    async def _resync_one(self, u: _Unsynced) -> bool:
        assert self.projector is not None
        proj = self.projector
        try:
            await self._ensure_recorder()
            assert self.recorder is not None
            start = proj.last_subject_seq.get(u.subject, 0) + 1
            async for msg in self.recorder.read(start, subject=u.subject):
                if not self._feed(msg.subject, msg.seq, msg.data):
                    return False
        except Exception as exc:  # server still away: stay on hold, try again on the next mutation
            self.hold.last_error = f"read-back: {type(exc).__name__}: {exc}"
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
        del self._unsynced[u.subject]
        if rest:
            self._attempt += 1
            if await self._append(u.subject, u.lineage_hash, rest, continuation=True) is not None:
                return False
        return True
