"""Runs admitted inputs through the model service's engine and journals what happens.

Order for one input, journalled on the author's lineage: the admission (already saved when the
executor hears of it — it observes applied journal messages, aotx.runtime.observers; the input's
embedding is computed while it waits) → the input waits in the execution queue until a group
admits it (aotx.runtime.grouping: each input claims its own conservative bound of KV pages at its
place in the engine's admission line, which stateless requests share) → a LEASE transfer per
lineage of the group (the runtime's lease revision, 3 by default; one row per input: request index
in the group, execution slot, sequence, actor, recorded retention mode) — the execution deadline
starts once it is applied → the input's run (aotx.runtime.input_run: memory work, the engine
request, OUTPUT transfers, one COMPLETION). Writes of many inputs share journal rounds.

An input the queue would lease at once (nothing queued ahead, its claim granted now) is leased when
the command round admits it (`lease_at_admission`, aotx.runtime.admission_lease): its lease goes
into the log with its admission, and it begins once the executor observes that lease applied.

The executor reaches the runtime only through its port (aotx.runtime.execution_port: journal these
events, wait for a hold to lift, read the acknowledged state and memory). A client going away
changes nothing here; only a saved cancellation stops an input (after its memory is committed,
cancelling does not undo it). A runtime that stops mid-way leaves the admission unfinished: the
next boot journals it `interrupted` and never runs it (nor its memory input) again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from typing import Any, Callable, Optional

from ..chat_types import ChatMessage
from ..journal import TransferKind
from ..journal.lease import Lease, LeaseRevision, LeaseRow
from ..memory import TEXT_LIMIT, recorded_mode
from ..state import Execution, ExecutionContext, InputAdmitted, InputCancelled, ModelCaps, State, SubmitInput
from ..state.execution import InputCompleted, LeaseApplied, execution_from_body
from ..state.member_wire import MEMBER_WIRE
from ..state.mutation_forms import from_canonical
from . import memory_work as mw
from .early_start import drop_early, submit_early
from .embedding import EmbeddingBatcher, default_embedder
from .execution_port import ExecutionJournal, ExecutionSettings, ProjectionReads
from .grouping import Candidate, claim_group
from .input_journal import InputJournal
from .input_run import FLUSH_BYTES, FLUSH_SECONDS, InputRunner
from .input_trace import stamp
from .observers import Applied
from .running import Running
from .stopping import cancel_and_wait

log = logging.getLogger("aotx.runtime.executor")
PUMP_SECONDS = 0.05      # how often a blocked queue looks at the page budget again
DEFAULT_DEADLINE_SECONDS = 300.0
__all__ = ["DEFAULT_DEADLINE_SECONDS", "Executor", "FLUSH_BYTES", "FLUSH_SECONDS", "PUMP_SECONDS",
           "default_embedder", "execution_context"]


def execution_context(service: Any, automatic_memory: bool = False) -> ExecutionContext:
    """The models and page grant a ModelService offers: its one model (text-only; automatic memory
    as qualified by the deployment) and, as page grant, the pages one request may hold (context
    window ∩ KV pool)."""
    engine = service.engine
    page_size = int(engine.config.page_size)
    grant = min(int(engine.config.num_pages), math.ceil(int(engine.max_model_len) / page_size))
    digest = bytes.fromhex(service.bundle.sha256)
    caps = ModelCaps(digest, media=False, automatic_memory=automatic_memory, context_tokens=int(engine.max_model_len))
    return ExecutionContext({service.model_id: caps}, grant)


class Executor:
    """`settings.deadline`: seconds from the applied lease to the end of memory work, generation and
    result publication; past it the input ends `deadline_exceeded` (status 504)."""

    def __init__(self, service: Any, journal: ExecutionJournal, reads: ProjectionReads,
                 settings: ExecutionSettings, *, embedder: Any = None) -> None:
        self.service, self.reads, self.settings = service, reads, settings
        self.deadline = settings.deadline
        self.author_grants = settings.author_grants   # replaceable: a grant file's current actions
        # whether this runtime writes a lineage (follow mode: SharedRuntime.writes), else every one
        self.writes: Callable[[bytes], bool] = lambda lineage: True
        self.running: dict[tuple[bytes, int], Running] = {}
        self.queue: deque[Running] = deque()          # not yet leased, in admission order
        self._embeddings = EmbeddingBatcher(embedder)
        self._pump: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None
        self._stopping = False
        caps = settings.context.models.get(service.model_id) if settings.context else None
        self._mode = int(recorded_mode(settings.retention_mode, bool(caps and caps.automatic_memory)))
        self.journal = InputJournal(journal, reads, lambda: self._stopping)
        self.runner = InputRunner(service, reads, settings, self.journal, self._embeddings.embed,
                                  lambda lineage: self.author_grants(lineage), self._kick_if_waiting)

    # ---- what it observes --------------------------------------------------------------------
    def saved(self, applied: Applied) -> None:
        """An observer of applied journal messages (live, whether the ack came back or a read-back
        found it landed): a saved admission starts its input, a saved cancellation stops its target."""
        for t in applied.transfers:
            if t.kind == TransferKind.MUTATION:   # most transfers: read the decoded event where there is one
                wire = t.__dict__.get("wire")
                if wire is not None and wire.__class__ is MEMBER_WIRE:
                    continue                      # a member change (its event left unbuilt): no cancellation
                ev = t.event                      # (reading `body` would unpack a fast-decoded payload again)
                if ev is not None:
                    if isinstance(ev, InputCancelled) and self.writes(ev.op.lineage):
                        self.cancel(ev.op.lineage, ev.target_sequence)
                elif t.body.get("kind") == InputCancelled.KIND and self.writes(t.body["lineage"]):
                    self.cancel(t.body["lineage"], t.body["target_sequence"])
                continue
            body = t.body
            if t.kind == TransferKind.ADMISSION:
                if not self.writes(body["lineage"]):
                    continue   # another runtime's input (follow mode): it runs there
                key = (body["lineage"], body["sequence"])
                run = self.running.get(key)
                if run is None or not run.preleased:   # a pre-leased one begins with its lease
                    self.start(*key, applied.mutations.get(key))
            elif t.kind == TransferKind.LEASE and self._preleased:
                for row in execution_from_body(t.kind, body).lease.rows:
                    run = self.running.get((row.actor, row.sequence))
                    if run is not None and run.preleased:
                        self._begin(run)

    def start(self, lineage: bytes, sequence: int, request: Any = None) -> None:
        """An admission was saved: queue the input for the next group that fits. `request`: its
        parsed input where the writer had it at hand, else read from its stored canonical bytes."""
        key = (lineage, sequence)
        if key in self.running or any(r.key == key for r in self.queue):
            return
        if not isinstance(request, SubmitInput):
            state = self.reads.state
            request = from_canonical(state.commands[state.receipt_slot(lineage, sequence)])
        run = Running(lineage, sequence, request)
        self.queue.append(run)
        # the embedding does not depend on the lease: compute it while the input waits for one
        run.embedding = asyncio.ensure_future(self._embeddings.embed(mw.retained_text(request)))
        self._kick()

    # ---- admission and lease in one append (aotx.runtime.admission_lease) ----------------------
    @property
    def _preleased(self) -> bool:
        return any(r.preleased for r in self.running.values())

    def lease_at_admission(self, state: State, lineage: bytes, request: SubmitInput,
                           admitted: InputAdmitted) -> LeaseApplied | None:
        """The lease of an input being admitted, where the queue would lease it at once: nothing
        queued ahead and its bound claimed now (a refused claim leaves the engine's line as it was)."""
        key = (lineage, admitted.op.sequence)
        con = state.conversation_row(admitted.conversation_lineage, admitted.conversation)
        if self._stopping or self.queue or key in self.running or con is None:
            return None   # (a conversation created in the same round: the usual path)
        space = state.spaces[int(state.conversations[con]["space"])]
        run = Running(lineage, admitted.op.sequence, request)
        run.space = space["lineage"].tobytes() + space["ident"].tobytes()
        self._describe(run, int(admitted.page_limit))
        engine = self.service.engine
        ahead = sum(r.entry for r in self.running.values() if not r.retained and r.space == run.space)
        self._bound(run, mw.visible_entry_bytes(self.reads.memory, run.space) + ahead, int(engine.config.page_size))
        run.claim = engine.claim_pages(run.pages, run.since)
        if run.claim is None:
            engine.release_hold()   # nothing else waits in the queue: no claimant holds the line
            return None
        run.slot, run.preleased = self._slot(), True
        self.running[key] = run
        run.embedding = asyncio.ensure_future(self._embeddings.embed(mw.retained_text(request)))
        self._submit_early(run, state)   # its prompt, where known already, goes to the engine with the append
        return LeaseApplied(lineage, Lease(LeaseRevision(self.settings.lease_revision),
                                           (LeaseRow(0, run.slot, run.sequence, lineage, self._mode),)))

    def admissions_settled(self, keys) -> None:
        """After the round: a pre-leased input whose lease was not applied goes to the queue (its
        admission saved) or away (its admission not, or not known: a read-back that finds it
        starts it as any saved admission)."""
        state = self.reads.state
        for key in keys:
            run = self.running.get(key)
            if run is None or not run.preleased:
                continue
            record = run.record(state)
            if record is not None and record.status is Execution.RUNNING:
                self._begin(run)   # (its applied lease was not observed: never left waiting)
                continue
            del self.running[key]
            drop_early(run)
            self._release(run)
            run.preleased, run.slot = False, -1
            if record is not None and record.status is Execution.QUEUED:
                self.queue.append(run)
                self._kick()
            elif run.embedding is not None:
                run.embedding.cancel()

    def _begin(self, run: Running) -> None:
        """Its lease is applied: the execution deadline starts, and the run."""
        run.preleased = False
        self.running[run.key] = run
        stamp(run.lineage, run.sequence, "begun")
        loop = asyncio.get_running_loop()
        run.timer = loop.call_later(self.deadline, run.expire)
        run.task = loop.create_task(self.runner.run(run, self._ended))

    def cancel(self, lineage: bytes, sequence: int) -> None:
        run = self.running.get((lineage, sequence)) or next(
            (r for r in self.queue if r.key == (lineage, sequence)), None)
        if run is None:
            return
        run.cancelled = True
        if run.handle is not None:
            run.handle.cancel()
        self._kick()

    def abandon(self, lineage: bytes) -> None:
        """This runtime lost the lineage's lease: stop its inputs there (their writes are refused;
        the new holder journals them interrupted)."""
        for run in [*self.running.values(), *self.queue]:
            if run.lineage == lineage:
                run.cancelled = True
                if run.handle is not None:
                    run.handle.cancel()
        self.queue = deque(r for r in self.queue if r.lineage != lineage)
        self._kick()

    async def stop(self) -> None:
        self._stopping = True
        tasks = [r.task for r in self.running.values() if r.task is not None]
        tasks += [t for t in (self._pump, self._embeddings.task) if t is not None]
        for run in [*self.running.values(), *self.queue]:
            if run.embedding is not None:
                run.embedding.cancel()
        for run in self.running.values():
            if run.handle is not None:
                run.handle.cancel()
        await cancel_and_wait(tasks, what="shared input task")
        for run in self.running.values():
            self._release(run)
        self.service.engine.release_hold()
        self.running.clear()
        self.queue.clear()

    def _submit_early(self, run: Running, state: State) -> None:
        submit_early(self.service, run, state, self.reads.memory, self._mode, self.settings.lease_revision,
                     self.author_grants)

    def _release(self, run: Running) -> None:
        """Its claim goes back to the line (it ended, or will never submit a request)."""
        if run.claim is not None:
            self.service.engine.release_claim(run.claim)
            run.claim = None

    def _ended(self, run: Running) -> None:
        if run.timer is not None:
            run.timer.cancel()
        drop_early(run)   # (an early request its run never read)
        self._release(run)
        run.retained = True
        self.running.pop(run.key, None)
        self._kick_if_waiting()

    # ---- grouping ----------------------------------------------------------------------------
    def _kick(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if (self._pump is None or self._pump.done()) and not self._stopping:
            self._pump = asyncio.get_running_loop().create_task(self._pump_loop())

    def _kick_if_waiting(self) -> None:
        if self.queue and not self._stopping:
            self._kick()

    async def _pump_loop(self) -> None:
        assert self._wake is not None
        try:
            await self._pump_queue()
        finally:   # nobody waits in the line any more
            self.service.engine.release_hold()

    async def _pump_queue(self) -> None:
        assert self._wake is not None
        while self.queue and not self._stopping:
            self._wake.clear()
            try:
                await self._settle_queue()
                group = self._group()
                if group:
                    await self._lease(group)
                    continue
            except Exception:  # a bug must not stall every later input
                log.exception("execution queue failed")
            try:
                await asyncio.wait_for(self._wake.wait(), PUMP_SECONDS)
            except asyncio.TimeoutError:
                pass

    async def _settle_queue(self) -> None:
        """Queued inputs that were cancelled (or already ended) leave the queue without a lease."""
        for run in list(self.queue):
            record = run.record(self.reads.state)
            if record is not None and not record.status.terminal and not (record.cancel_requested or run.cancelled):
                continue
            self.queue.remove(run)
            if record is not None and not record.status.terminal:
                await self.journal.write(run, InputCompleted(run.lineage, run.sequence, Execution.CANCELLED,
                                                             finish="cancelled"))

    def _describe(self, run: Running, page_limit: int | None = None) -> None:
        """Once per input: its space, its bare prompt length, output budget, page limit and the bytes
        its memory may add (the pump looks at every queued input each time it runs). `page_limit`:
        from its admission event, before that is applied (its space is then set by the caller)."""
        if run.user_tokens:
            return
        request = run.request
        run.max_tokens = int(request.max_output_tokens)
        if page_limit is None:
            state = self.reads.state
            page_limit = int(run.record(state).page_limit)
            run.space = mw.input_place(state, state.receipt_slot(run.lineage, run.sequence)).space
        run.page_limit = page_limit
        run.user_tokens = len(run.prompt(self.service, [ChatMessage(role="user", content=request.text)]))
        run.entry = mw.entry_bound(len(mw.retained_text(request)), TEXT_LIMIT if self._mode == 2 else None)

    @staticmethod
    def _bound(run: Running, memory_bytes: int, page_size: int) -> None:
        """Its conservative bound in pages: bare prompt + what recall could add + output budget."""
        memory = mw.memory_prompt_bound(memory_bytes)
        run.pages = max(1, min(run.page_limit, math.ceil((run.user_tokens + memory + run.max_tokens) / page_size)))

    def _group(self) -> list[Running]:
        """The head of the queue whose claims the engine grants. Each input's bound: its bare prompt +
        what recall could add (memory visible in its space now + the memory of unretained inputs of
        that space ahead of it) + its output budget, in pages, never more than its page limit."""
        engine = self.service.engine
        page_size = int(engine.config.page_size)
        store, visible, ahead = self.reads.memory, {}, {}
        for r in self.running.values():
            if not r.retained:
                ahead[r.space] = ahead.get(r.space, 0) + r.entry
        queue = []
        for r in self.queue:
            self._describe(r)
            if r.space not in visible:
                visible[r.space] = mw.visible_entry_bytes(store, r.space)
            self._bound(r, visible[r.space] + ahead.get(r.space, 0), page_size)
            queue.append(Candidate(r.lineage, r.sequence, r.pages, r.since))
            ahead[r.space] = ahead.get(r.space, 0) + r.entry
        claims = claim_group(queue, lambda c: engine.claim_pages(c.pages, c.since))
        if len(claims) == len(queue):
            engine.release_hold()
        group = [self.queue.popleft() for _ in claims]
        for run, claim in zip(group, claims):
            run.claim = claim
        return group

    def _slot(self) -> int:
        used = {r.slot for r in self.running.values()}
        return next(i for i in range(len(used) + 1) if i not in used)

    async def _lease(self, group: list[Running]) -> None:
        """One LEASE transfer per lineage of the group; each input runs once its lease is applied
        (one whose lease a read-back found in the log already runs without another)."""
        revision = LeaseRevision(self.settings.lease_revision)
        by_lineage: dict[bytes, list[tuple[int, Running]]] = {}
        state = self.reads.state
        for index, run in enumerate(group):
            run.slot = self._slot()
            self.running[run.key] = run
            record = run.record(state)
            if record is not None and record.status is Execution.RUNNING:
                self._begin(run)
                continue
            by_lineage.setdefault(run.lineage, []).append((index, run))
            self._submit_early(run, state)
        leases = [LeaseApplied(lineage, Lease(revision, tuple(LeaseRow(i, r.slot, r.sequence, lineage, self._mode)
                                                             for i, r in rows)))
                  for lineage, rows in by_lineage.items()]
        # the lineages' lease transfers go out together (one journal round: parallel appends)
        oks = await asyncio.gather(*(self.journal.write(rows[0][1], lease)
                                     for (_, rows), lease in zip(by_lineage.items(), leases)))
        for ok, rows in zip(oks, by_lineage.values()):
            for _, run in rows:
                if not ok:  # its lease is not in the log: it stays queued there until the next boot interrupts it
                    self.running.pop(run.key, None)
                    drop_early(run)
                    self._release(run)
                    continue
                self._begin(run)   # the execution deadline starts now that the lease is applied
