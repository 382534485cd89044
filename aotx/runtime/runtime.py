"""SharedRuntime: the one writer of the shared state, as a small facade over its parts.

A command is parsed by its caller (aotx.runtime.port.parse_submission) and queued; the command
group commit (pipeline) takes every command queued while the previous round was deciding, and a
round (command_round; the next begins while its append is in flight) plans it — pure decide in
order against the acknowledged or the pending state, cross-lineage dependencies (planner, dependencies) — encodes each lineage's events as ticks
(ticks) and has the journal writer (writer) append them with Nats-Msg-Id and the expected last
subject sequence, lineages in parallel, and feed only the acknowledged ticks to the Projector in
stream order, exactly as boot replay does. Nothing changes state except an acknowledged journal
message; a command is answered after the ack of the tick that completes it.

Execution writes (the executor's leases, memory, output, completions) go through their own group
commit on the same writer (execution_round); the executor reaches the runtime only through that
port (execution_port) and hears of saved admissions and cancellations as an observer of applied
messages (observers) — as does the change feed (targets), which tells the broker (broker) what each
applied message concerns, so that only the stream readers it concerns read again.

Journal hold (HoldStatus, writer): JournalFull / JournalUnavailable put the runtime on hold: a new
mutation answers 429 and changes nothing; reads, exact retries and refusals keep working; the hold
lifts once space returns and the log is in sync again (read back). Boot (boot): replay, then every
unfinished input is journalled `interrupted`.

Stored state of the standard surfaces (aotx.stored; `runtime.stored`, a StoredWrites: the
StoredJournal port the API uses): stored commands have their own group commit on the same writer
(stored_round: decide against the acknowledged state, journal on the identity's lineage, apply on
ack); at boot what the previous run left unfinished is journalled interrupted, then retention is swept.

Snapshots (aotx.snapshot, optional): a SnapshotKeeper is the boot start (boot.snapshot_start: the
newest valid snapshot, then only the tail is replayed) and an observer of applied messages (it
encodes a snapshot when due, at the consistent point right after an apply); the runtime tells it
when boot is done and closes it in stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import uuid
from typing import Any, Callable

from eventlog import NatsAuth, Recorder, StreamSpec

from ..journal import lineage_hash
from ..memory import MemoryStore
from ..projection import Projector
from ..snapshot import SnapshotKeeper, SnapshotPolicy
from ..state import Capacities, State, state_hash
from ..state.mutations import Mutation
from ..state.rights import Actor, Grants
from ..stored import StoredLimits, identity_lineage, stored_digest
from . import boot
from .connection import JournalConnection
from .execution_port import ExecutionSettings
from .execution_round import ExecutionWrites
from .executor import DEFAULT_DEADLINE_SECONDS, Executor, execution_context
from .follower import Follower
from .lease_mode import attach_leases, lineage_refusal
from .ownership import LeasePolicy
from .pipeline import PipelinedCommands
from .hold import HoldStatus
from .broker import Broker
from .observers import Observers
from .outcome import Outcome
from .planner import Cmd
from .port import RuntimePort
from .projection import ProjectionView
from .read_fresh import READ_WAIT, LogEnd, fresh
from .stopping import cancel_and_wait
from .stored_writes import StoredWrites
from .targets import ChangeFeed
from .views import run_view
from .batch_append import BATCH_MIN_MESSAGES
from .writer import JournalWriter

log = logging.getLogger("aotx.runtime")
MAX_BATCH = 64      # commands decided together (their ticks: ≤ 16 records each, one append per tick)
_STOPPED = Outcome.error(503, "runtime_failed", "the shared runtime stopped")


class SharedRuntime(RuntimePort):
    """Construct, `await start()` (connects if given a URL, then boots by replay), use, `await stop()`.

    `boot_start` (aotx.runtime.boot.StartPoint): where boot starts reading (default: a fresh
    projector at sequence 1). `snapshots` (a SnapshotPolicy; None: off; needs `nats_url`): a
    SnapshotKeeper supplies the boot start (the newest valid snapshot) and, as an observer of applied
    messages, writes one when due; the two are exclusive. `batch_min_messages`: a write round with at
    least this many journal messages goes out as one atomic batch where the log takes them
    (aotx.runtime.batch_append)."""

    def __init__(self, nats_url: str | None = None, spec: StreamSpec | None = None,
                 capacities: Capacities | None = None, *, recorder: Recorder | None = None,
                 timeout: float = 5.0, progress: bool = True, boot_id: str | None = None,
                 probe_interval: float = 1.0, service: Any = None,
                 execution_deadline: float = DEFAULT_DEADLINE_SECONDS, retention_mode: int = 1,
                 lease_revision: int = 3, automatic_memory: bool = False, embedder: Any = None,
                 nats_auth: NatsAuth | None = None, boot_start: boot.StartPoint | None = None,
                 snapshots: SnapshotPolicy | None = None, stored_limits: StoredLimits | None = None,
                 clock: Callable[[], float] | None = None, batch_min_messages: int = BATCH_MIN_MESSAGES,
                 follow: bool = False, leases: LeasePolicy | None = None) -> None:
        if (nats_url is None) == (recorder is None):
            raise ValueError("give exactly one of nats_url or recorder")
        if not execution_deadline > 0:
            raise ValueError(f"execution_deadline must be positive, got {execution_deadline!r}")
        if retention_mode not in (1, 2):
            raise ValueError(f"retention_mode must be 1 or 2, got {retention_mode!r}")
        if lease_revision not in (3, 4, 5):
            raise ValueError(f"lease_revision must be 3, 4 or 5 (the revisions new leases use), got {lease_revision!r}")
        self.nats_url, self.spec = nats_url, spec or StreamSpec()
        self.nats_auth = nats_auth   # credentials for nats_url (eventlog.NatsAuth); never logged
        self.capacities = capacities or Capacities()
        self.progress, self.boot_start = progress, boot_start
        self.boot_id = boot_id or uuid.uuid4().hex
        self.probe_interval = probe_interval
        self.execution_deadline = float(execution_deadline)
        # what the deployment asks for; the recorded mode is 2 only where the model is qualified
        self.retention_mode, self.lease_revision = int(retention_mode), int(lease_revision)
        self.automatic_memory = bool(automatic_memory)   # the served model's automatic-memory qualification
        self.embedder = embedder
        self.observers = Observers()       # told of every applied journal message (live)
        # the writer owns the journal connection
        self.writer = JournalWriter(JournalConnection(nats_url, self.spec, recorder=recorder, timeout=timeout,
                                                      name=f"aotx-runtime-{self.boot_id[:8]}", auth=nats_auth),
                                    self.spec, self.boot_id, self.observers, batch_min_messages)
        self.reads = ProjectionView(lambda: self.writer.projector)
        # stream readers: what each applied message concerns (changes) goes to the broker (and the
        # split deployment's announcer, a sink of its own)
        self.broker = Broker()
        self.changes = ChangeFeed(lambda: self.reads.state)
        self.changes.add(self.broker.deliver, listening=self.broker.listening)
        self.observers.add(self.changes)
        self.commands = PipelinedCommands(self.writer, lambda: (self.context, self.executor), max_batch=MAX_BATCH)
        self.executions = ExecutionWrites(self.writer, probe_interval)
        # stored responses, conversations and idempotency keys (aotx.stored), on the same writer
        self.stored = StoredWrites(self.writer, self.observers, stored_limits, **({"clock": clock} if clock else {}))
        self.snapshots: SnapshotKeeper | None = None
        if snapshots is not None and nats_url is not None:
            if boot_start is not None:
                raise ValueError("give snapshots or boot_start, not both: the keeper supplies the boot start")
            self.snapshots = SnapshotKeeper(nats_url, nats_auth, self.spec, self.capacities, snapshots)
            self.boot_start = boot.snapshot_start(self.snapshots, self.capacities)
            self.observers.add(self.snapshots.applied)
        self._prober: asyncio.Task | None = None
        # follow mode: other runtimes write other lineages of this journal (docs/SCALE.md)
        # lease mode (docs/SCALE.md §2): follow mode, and a lineage is written only under its lease
        self.lease_policy, self.ownership = leases, None
        follow = follow or leases is not None
        self.follower: Follower | None = Follower(self.writer) if follow else None
        self.writer.catch_up, self.writer.follower = follow, self.follower
        if follow:
            self.stored.writes = self.writes
        if leases is not None:
            self.stored.ensure = self._stored_owner
        # a read waits (at most read_wait s) until the log's end at its arrival is applied (read_fresh)
        self.read_wait, self.log_end = READ_WAIT, LogEnd(self.writer)
        self.service: Any = None
        self.context = None
        self.executor: Executor | None = None
        self._author_grants: Callable[[bytes], Grants] = lambda lineage: Grants.all()
        if service is not None:
            self.attach_service(service)

    @property
    def author_grants(self) -> Callable[[bytes], Grants]:
        """An input author's current grants (lineage → Grants), read when his input recalls memory. A
        bare runtime trusts its callers' actors: membership alone decides (GrantedRuntime puts the
        deployment grant file's here)."""
        return self._author_grants

    @author_grants.setter
    def author_grants(self, grants: Callable[[bytes], Grants]) -> None:
        self._author_grants = grants
        if self.executor is not None:
            self.executor.author_grants = grants

    def attach_service(self, service: Any) -> None:
        """Run inputs with this ModelService (the same engine and KV pool as the stateless surfaces).
        Without one, the runtime refuses inputs (409)."""
        self.service = service
        if self.embedder is None:  # memory input needs the text embedding model: load it now, not at the first input
            from .embedding import default_embedder
            self.embedder = default_embedder()
        start = getattr(self.embedder, "start", None)   # a worker process (process_embedder) loads meanwhile
        if callable(start):
            start()
        self.context = execution_context(service, self.automatic_memory)
        if self.executor is not None:
            self.observers.remove(self.executor.saved)
        self.executor = Executor(service, self.executions, self.reads, ExecutionSettings(
            self.context, self.execution_deadline, self.retention_mode, self.lease_revision,
            self.capacities.result_bytes, self._author_grants), embedder=self.embedder)
        if self.follower is not None:
            self.executor.writes = self.writes
        self.observers.add(self.executor.saved)

    # ---- lifecycle ----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.writer.projector is not None

    async def start(self) -> "SharedRuntime":
        if self.started:
            return self
        recorder = await self.writer.connection.ensure(booted=False)
        try:
            point = boot.BootPoint() if self.boot_start is None else await self.boot_start(recorder)
            self.writer.projector = await boot.replay(recorder, self.capacities, progress=self.progress,
                                                      projector=point.projector, from_seq=point.from_seq,
                                                      on_progress=self.writer.metrics.replay_progress)
        except BaseException:
            await self.stop()  # fail closed: no state, no connection left behind
            raise
        if self.snapshots is not None:   # its boot line; from here on it snapshots what is applied live
            self.snapshots.booted(self.writer.projector)
        if self.follower is None:   # alone on the journal: what no one finishes any more is interrupted
            await boot.interrupt_unfinished(self.writer.projector.state, self.executions)
        else:                       # other runtimes may be running theirs (takeover: docs/SCALE.md)
            self.follower.start()
            if self.lease_policy is not None:
                self.ownership = await attach_leases(self, self.lease_policy)
        await self.stored.booted()
        self._prober = asyncio.get_running_loop().create_task(self.writer.probe_forever(self.probe_interval))
        log.info("shared runtime booted", extra={"fields": {
            "boot": self.boot_id, "messages": self.projector.messages, "transfers": self.projector.transfers}})
        return self

    async def stop(self) -> None:
        """Stop executing, writing and probing, then close the log; bounded (cancel_and_wait, the
        recorder's bounded close), also when nats-server is gone."""
        if self.executor is not None:
            await self.executor.stop()
        close = getattr(self.embedder, "close", None)   # a worker process of its own (process_embedder)
        if callable(close):
            await asyncio.to_thread(close)
        await self.executions.commit.stop(_STOPPED)
        await self.stored.stop()
        await self.commands.stop(_STOPPED)
        if self.follower is not None:
            await self.follower.stop()
        if self.ownership is not None:   # gives the leases back: a successor need not wait for the TTL
            await self.ownership.stop()
        await cancel_and_wait([self._prober], what="journal prober")
        await self.log_end.stop()
        self._prober = None
        if self.snapshots is not None:   # nothing is applied any more: wait (bounded) for an upload under way
            await self.snapshots.close()
        await self.writer.connection.close()

    async def probe(self) -> bool:
        """Lift a hold once the log is back in sync and has room again; True when no hold is left."""
        return await self.writer.probe()

    async def _stored_owner(self, identity: str) -> str | None:
        refused = await self.ownership.ensure(identity_lineage(identity))
        return None if refused is None else refused.message

    def writes(self, lineage: bytes) -> bool:
        """Whether this runtime is the current writer of `lineage` (follow mode): the last
        `runtime.boot` control record on its subject is this boot's (and, in lease mode, it holds the
        lineage's lease). Alone on a journal: always."""
        if self.follower is None:
            return True
        if self.ownership is not None and not self.ownership.may_write(lineage):
            return False
        proj = self.writer.projector
        return proj is not None and proj.boots.get(lineage_hash(lineage)) == self.boot_id

    # ---- the parts' state, as callers (tests, the drill, ops) read it ---------------------------
    @property
    def projector(self) -> Projector | None:
        return self.writer.projector

    @property
    def recorder(self) -> Recorder | None:
        return self.writer.connection.recorder

    @property
    def hold(self) -> HoldStatus:
        return self.writer.hold

    @property
    def failed(self) -> str | None:
        return self.writer.failed

    # ---- reads -------------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self.reads.state

    @property
    def memory(self) -> MemoryStore:
        return self.reads.memory

    def state_hash(self) -> str:
        """The state's hash combined with the memory store's and the stored state's digests: live = replay
        covers all three (a runtime with nothing stored hashes as before the stored state existed)."""
        text = f"{state_hash(self.state)}:{self.memory.digest()}"
        if self.projector.stored.books:
            text += f":{stored_digest(self.projector.stored)}"
        return hashlib.blake2b(text.encode(), digest_size=32).hexdigest()

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        """A named read (views.VIEWS) of the current state; with other writers on the journal, of a state
        that holds the log as it was when the read arrived (read_fresh), else 503 `lagging`."""
        late = await fresh(self, view, actor, args)
        return late if late is not None else run_view(self.state, view, actor, args, self.memory)

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
        proj = self.projector
        out.update({"source": proj.source if proj else None, "incarnation": proj.incarnation if proj else None,
                    "boot": self.boot_id, "failed": self.failed})
        return out

    # ---- the write path --------------------------------------------------------------------------
    async def submit(self, actor: Actor, mutation: Mutation) -> Outcome:
        """One parsed mutation. It joins the command queue and is answered once the round that holds
        it is resolved: a new operation only after the ack of the tick that completes it."""
        if self.ownership is not None:   # lease mode (without leases every lineage is this runtime's to write)
            refused = await lineage_refusal(self, actor.principal)
            if refused is not None:
                return refused
        cmd = Cmd(actor, mutation, asyncio.get_running_loop().create_future())
        # a caller that goes away cancels only its own future, never the writer or the round
        return await self.commands.submit(cmd)
