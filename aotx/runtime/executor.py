"""Runs admitted inputs through the model service's engine and journals what happens.

Order for one input, journalled on the author's lineage: the admission (already saved when the
executor hears of it; the input's embedding is computed while it waits) → the input waits in the
execution queue until a group admits it (aotx.runtime.grouping: each input claims its own
conservative bound of KV pages at its place in the engine's admission line, which stateless
requests share) → a LEASE transfer per lineage of the group (the runtime's lease revision, 3 by
default; one row per input: request index in the group, execution slot, sequence, actor, recorded
retention mode) — the execution deadline starts once it is applied → memory work
(aotx.runtime.memory_work: recall into the prompt by the lease revision, mode 2 interpretation by
the same model) → the engine request (the same Engine and paged KV pool as the stateless
surfaces) → the MEMORY transfer retaining the input, written together with the first OUTPUT
transfer (its prompt never depends on its own memory) → OUTPUT transfers, batches of result
bytes as they come → the last bytes and one COMPLETION transfer (final input/output token
counts, finish) in one write. Writes of many inputs share journal rounds (runtime group commit).

A client going away changes nothing here; only a saved cancellation stops an input (after its
memory is committed, cancelling does not undo it). A journal write that fails on a hold is
retried once the hold lifts (what a read-back already applied is not written again), so an input
resumes where it stood. A runtime that stops mid-way leaves the admission unfinished: the next
boot journals it `interrupted` and never runs it (nor its memory input) again.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..journal.lease import Lease, LeaseRevision, LeaseRow
from ..memory import MemoryRetained, recorded_mode
from ..state import Execution, ExecutionContext, ModelCaps
from ..state.execution import InputCompleted, LeaseApplied, OutputAppended
from . import memory_work as mw
from .grouping import Candidate, claim_group
from .stopping import cancel_and_wait

if TYPE_CHECKING:
    from .runtime import SharedRuntime

log = logging.getLogger("aotx.runtime.executor")
FLUSH_BYTES = 256        # an output transfer is journalled once this many bytes wait …
FLUSH_SECONDS = 0.1      # … or this long after the previous one
PUMP_SECONDS = 0.05      # how often a blocked queue looks at the page budget again
DEFAULT_DEADLINE_SECONDS = 300.0


def execution_context(service: Any, automatic_memory: bool = False) -> ExecutionContext:
    """The models and page grant a ModelService offers: its one model (text-only; automatic memory
    as qualified by the deployment) and, as page grant, the pages one request may hold (context
    window ∩ KV pool)."""
    engine = service.engine
    page_size = int(engine.config.page_size)
    grant = min(int(engine.config.num_pages), math.ceil(int(engine.max_model_len) / page_size))
    digest = bytes.fromhex(service.bundle.sha256)
    caps = ModelCaps(digest, media=False, automatic_memory=automatic_memory, context_tokens=int(engine.max_model_len))
    return ExecutionContext({service.model_id: caps},
                            grant)


@functools.lru_cache(maxsize=1)
def default_embedder() -> Any:
    """all-MiniLM-L6-v2 from its wheel, loaded once per process."""
    from kernels.embedding import load_embedding_model
    return load_embedding_model()


@dataclass
class _Running:
    lineage: bytes
    sequence: int
    pages: int = 0              # bound of the pages it will hold (what it claims)
    since: float = field(default_factory=time.monotonic)   # its place in the admission line
    claim: Any = None           # its page claim (aotx.engine), from its group until its request takes it over
    space: bytes = b""          # its conversation's space
    user_tokens: int = 0        # its prompt without recalled memory
    max_tokens: int = 0         # its output budget
    page_limit: int = 0         # its effective page limit (from its admission)
    entry: int = 0              # bytes its own memory may add to later recalls in that space
    retained: bool = False      # its memory input is committed (or it ended without one)
    embedding: Optional[asyncio.Future] = None   # its text's embedding, computed while it waits for its lease
    memory_event: Any = None    # its memory input, journalled with its next write (first output or completion)
    task: Optional[asyncio.Task] = None
    handle: Any = None
    slot: int = -1
    cancelled: bool = False
    expired: bool = False
    timer: Optional[asyncio.TimerHandle] = None

    def expire(self) -> None:
        self.expired = True
        if self.handle is not None:
            self.handle.cancel()

    @property
    def stopped(self) -> bool:
        return self.cancelled or self.expired


@dataclass
class Executor:
    """`deadline`: seconds from the applied lease to the end of memory work, generation and result
    publication; past it the input ends `deadline_exceeded` (status 504)."""

    runtime: "SharedRuntime"
    service: Any
    deadline: float = DEFAULT_DEADLINE_SECONDS
    embedder: Any = None
    running: dict[tuple[bytes, int], _Running] = field(default_factory=dict)
    queue: deque = field(default_factory=deque)      # _Running not yet leased, in admission order
    _pump: Optional[asyncio.Task] = None
    _embedding: Optional[asyncio.Task] = None
    _embed_queue: list = field(default_factory=list)
    _wake: Optional[asyncio.Event] = None
    _stopping: bool = False

    # ---- the runtime's side ------------------------------------------------------------------
    def start(self, lineage: bytes, sequence: int) -> None:
        """An admission was saved: queue the input for the next group that fits."""
        key = (lineage, sequence)
        if key in self.running or any((r.lineage, r.sequence) == key for r in self.queue):
            return
        run = _Running(lineage, sequence)
        self.queue.append(run)
        # the embedding does not depend on the lease: compute it while the input waits for one
        run.embedding = asyncio.ensure_future(self._embed(mw.retained_text(self._request(run))))
        self._kick()

    def cancel(self, lineage: bytes, sequence: int) -> None:
        run = self.running.get((lineage, sequence)) or next(
            (r for r in self.queue if (r.lineage, r.sequence) == (lineage, sequence)), None)
        if run is None:
            return
        run.cancelled = True
        if run.handle is not None:
            run.handle.cancel()
        self._kick()

    async def stop(self) -> None:
        self._stopping = True
        tasks = [r.task for r in self.running.values() if r.task is not None]
        tasks += [t for t in (self._pump, self._embedding) if t is not None]
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

    def _release(self, run: _Running) -> None:
        """Its claim goes back to the line (it ended, or will never submit a request)."""
        if run.claim is not None:
            self.service.engine.release_claim(run.claim)
            run.claim = None

    # ---- grouping ----------------------------------------------------------------------------
    def _kick(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if (self._pump is None or self._pump.done()) and not self._stopping:
            self._pump = asyncio.get_running_loop().create_task(self._pump_loop())

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
            record = self._record(run)
            if record is not None and not record.status.terminal and not (record.cancel_requested or run.cancelled):
                continue
            self.queue.remove(run)
            if record is not None and not record.status.terminal:
                await self._journal(run, InputCompleted(run.lineage, run.sequence, Execution.CANCELLED,
                                                        finish="cancelled"))

    def _mode(self) -> int:
        caps = self.runtime.context.models[self.service.model_id] if self.runtime.context else None
        return int(recorded_mode(self.runtime.retention_mode, bool(caps and caps.automatic_memory)))

    def _describe(self, run: _Running) -> None:
        """Once per input: its space, its bare prompt length, output budget, page limit and the bytes
        its memory may add (the pump looks at every queued input each time it runs)."""
        if run.user_tokens:
            return
        state = self.runtime.state
        request = self._request(run)
        run.max_tokens, run.page_limit = int(request["max_output_tokens"]), int(self._record(run).page_limit)
        run.space = mw.input_place(state, state.receipt_slot(run.lineage, run.sequence)).space
        from ..chat_types import ChatMessage
        run.user_tokens = len(self.service.chat_prompt([ChatMessage(role="user", content=request["text"])]))
        from ..memory import TEXT_LIMIT
        run.entry = mw.entry_bound(len(mw.retained_text(request)), TEXT_LIMIT if self._mode() == 2 else None)

    def _group(self) -> list[_Running]:
        """The head of the queue whose claims the engine grants. Each input's bound: its bare prompt +
        what recall could add (memory visible in its space now + the memory of unretained inputs of
        that space ahead of it) + its output budget, in pages, never more than its page limit."""
        engine = self.service.engine
        page_size = int(engine.config.page_size)
        store, visible, ahead = self.runtime.memory, {}, {}
        for r in self.running.values():
            if not r.retained:
                ahead[r.space] = ahead.get(r.space, 0) + r.entry
        queue = []
        for r in self.queue:
            self._describe(r)
            if r.space not in visible:
                visible[r.space] = mw.visible_entry_bytes(store, r.space)
            memory = mw.memory_prompt_bound(visible[r.space] + ahead.get(r.space, 0))
            r.pages = max(1, min(r.page_limit, math.ceil((r.user_tokens + memory + r.max_tokens) / page_size)))
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

    async def _lease(self, group: list[_Running]) -> None:
        """One LEASE transfer per lineage of the group; each input runs once its lease is applied."""
        revision = LeaseRevision(self.runtime.lease_revision)
        mode = self._mode()
        by_lineage: dict[bytes, list[tuple[int, _Running]]] = {}
        for index, run in enumerate(group):
            run.slot = self._slot()
            self.running[(run.lineage, run.sequence)] = run
            by_lineage.setdefault(run.lineage, []).append((index, run))
        leases = [LeaseApplied(lineage, Lease(revision, tuple(LeaseRow(i, r.slot, r.sequence, lineage, mode)
                                                             for i, r in rows)))
                  for lineage, rows in by_lineage.items()]
        # the lineages' lease transfers go out together (one journal round: parallel appends)
        oks = await asyncio.gather(*(self._journal(rows[0][1], lease)
                                     for (_, rows), lease in zip(by_lineage.items(), leases)))
        for ok, rows in zip(oks, by_lineage.values()):
            for _, run in rows:
                if not ok:  # its lease is not in the log: it stays queued there until the next boot interrupts it
                    self.running.pop((run.lineage, run.sequence), None)
                    self._release(run)
                    continue
                # the execution deadline starts now that the lease is applied
                run.timer = asyncio.get_running_loop().call_later(self.deadline, run.expire)
                run.task = asyncio.get_running_loop().create_task(self._run(run))

    # ---- journal -----------------------------------------------------------------------------
    def _record(self, run: _Running):
        state = self.runtime.state
        slot = state.receipt_slot(run.lineage, run.sequence)
        return None if slot is None else state.executions[slot]

    def _request(self, run: _Running) -> dict[str, Any]:
        state = self.runtime.state
        return json.loads(state.commands[state.receipt_slot(run.lineage, run.sequence)])

    def _landed(self, run: _Running, event: Any) -> bool:
        """Is `event` already in the state (a read-back after an unacknowledged write found it)?"""
        state = self.runtime.state
        if isinstance(event, LeaseApplied):
            return all((r := state.executions[state.receipt_slot(row.actor, row.sequence)]) is not None
                       and r.status is not Execution.QUEUED for row in event.lease.rows)
        if isinstance(event, MemoryRetained):
            return self.runtime.memory.has_retained(event.op.lineage, event.op.operation)
        record = self._record(run)
        if record is None:
            return False
        if isinstance(event, OutputAppended):
            return len(record.output) >= event.offset + len(event.data)
        return record.status.terminal

    async def _journal(self, run: _Running, *events: Any) -> bool:
        """Journal an input's execution events in one write; on a hold, wait for it to lift and go on
        where it stood (what a read-back already applied is not written again). The input's memory
        input rides with its next write, ahead of it: in the log before any output of the input."""
        todo = list(events)
        with_memory = run.memory_event is not None and not any(isinstance(e, LeaseApplied) for e in todo)
        if with_memory:
            todo.insert(0, run.memory_event)
        names = "+".join(type(e).__name__ for e in todo)
        while True:
            todo = [e for e in todo if not self._landed(run, e)]
            if not todo:
                break
            failure = await self.runtime.journal_execution(run.lineage, todo)
            if failure is None:
                break
            if failure.status != 429 or self.runtime.failed or self._stopping:
                if all(self._landed(run, e) for e in todo):
                    break
                log.warning("input %s/%d: journalling %s failed (%s); the next boot marks it interrupted",
                            run.lineage.hex(), run.sequence, names, failure.body)
                return False
            log.info("input %s/%d: journal on hold; %s waits for it to lift", run.lineage.hex(), run.sequence, names)
            while not await self.runtime.probe():
                await asyncio.sleep(self.runtime.probe_interval)
        if with_memory:
            run.memory_event, run.retained = None, True
        return True

    # ---- one input ---------------------------------------------------------------------------
    async def _run(self, run: _Running) -> None:
        try:
            await self._execute(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not leave the input looking alive: record it as failed
            log.exception("input %s/%d failed", run.lineage.hex(), run.sequence)
            record = self._record(run)
            if record is not None and not record.status.terminal:
                await self._journal(run, InputCompleted(run.lineage, run.sequence, Execution.FAILED,
                                                        error="internal error while executing the input"))
        finally:
            if run.timer is not None:
                run.timer.cancel()
            self._release(run)
            run.retained = True
            self.running.pop((run.lineage, run.sequence), None)
            self._kick_if_waiting()

    def _kick_if_waiting(self) -> None:
        if self.queue and not self._stopping:
            self._kick()

    async def _execute(self, run: _Running) -> None:
        record = self._record(run)
        if record is None or record.status.terminal:
            return
        if record.cancel_requested or run.stopped:
            await self._journal(run, self._stopped(run, 0, 0))
            return
        request = self._request(run)
        memory = await self._memory(run, record, request)
        if memory is None:
            return
        prompt = self.service.chat_prompt(mw.prompt_messages(memory, request["text"]))
        page_size = int(self.service.engine.config.page_size)
        room = record.page_limit * page_size - len(prompt)
        if room < 1:
            await self._journal(run, InputCompleted(
                run.lineage, run.sequence, Execution.FAILED, input_tokens=len(prompt), finish="error",
                error=f"the prompt needs {math.ceil((len(prompt) + 1) / page_size)} KV pages; "
                      f"this input's page limit is {record.page_limit}"))
            return
        from aotx.engine import SamplingParams
        params = SamplingParams(max_tokens=min(int(request["max_output_tokens"]), room),
                                temperature=float(request["temperature"]), top_p=float(request["top_p"]))
        if self._record(run).cancel_requested or run.stopped:
            await self._journal(run, self._stopped(run, len(prompt), 0))
            return
        claim, run.claim = run.claim, None   # the request takes its claim over (a refused one releases it)
        try:
            run.handle = self.service.submit(prompt, params, surface="shared", lane="stream", claim=claim)
        except Exception as exc:  # RequestRejected (queue full, engine stopping, …)
            self.service.engine.release_claim(claim)   # (idempotent: a refusal has released it)
            await self._journal(run, InputCompleted(run.lineage, run.sequence, Execution.FAILED,
                                                    input_tokens=len(prompt), finish="error",
                                                    error=f"the engine refused the input: {exc}"))
            return
        finally:
            self._kick_if_waiting()
        if run.stopped:
            run.handle.cancel()
        await self._stream(run, len(prompt))

    async def _memory(self, run: _Running, record, request: dict[str, Any]):
        """Embed, recall, interpret (mode 2) and retain. The rendered memory for the prompt, or None
        when the input ended here (cancelled, past its deadline, or its journal failed)."""
        state = self.runtime.state
        place = mw.input_place(state, state.receipt_slot(run.lineage, run.sequence))
        text = mw.retained_text(request)
        vector = await (run.embedding if run.embedding is not None else self._embed(text))
        # the author's rights now, after the wait (not those at admission)
        rendered = mw.recall_for(self.runtime.state, self.runtime.memory, place.space, run.lineage,
                                 self.runtime.author_grants(run.lineage), vector, int(record.lease_revision))
        mode = int(record.retention_mode)
        interpretation = None
        if mode == 2:
            interpretation = await self._interpret(run, request)
            if interpretation is None:
                await self._journal(run, self._stopped(run, 0, 0))
                return None
        if self._record(run).cancel_requested or run.stopped:
            await self._journal(run, self._stopped(run, 0, 0))
            return None
        if not self.runtime.memory.has_retained(place.op.lineage, place.op.operation):
            # its prompt does not depend on its own memory: generation starts now, and the memory
            # input goes into the log with the input's next write (its first output, or its end)
            run.memory_event = mw.retention(place, run.lineage, mode, text, vector, interpretation)
        else:
            run.retained = True
        return rendered

    async def _embed(self, text: bytes):
        """Embeddings are batched: texts of inputs in memory work at the same time go to the model
        in one call (in a worker thread), which costs about what one text costs alone."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._embed_queue.append((text, fut))
        if self._embedding is None or self._embedding.done():
            self._embedding = loop.create_task(self._embed_loop())
        return await fut

    async def _embed_loop(self) -> None:
        embedder = self.embedder or default_embedder()
        while self._embed_queue:
            batch, self._embed_queue = self._embed_queue, []
            try:
                vectors = await asyncio.to_thread(mw.embed_many, embedder, [t for t, _ in batch])
            except Exception as exc:  # each input's own task records it as failed
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, fut), vector in zip(batch, vectors):
                if not fut.done():
                    fut.set_result(vector)

    async def _interpret(self, run: _Running, request: dict[str, Any]) -> bytes | None:
        """Mode 2: the same model's interpretation of the input (None when stopped meanwhile)."""
        from aotx.engine import SamplingParams
        prompt = self.service.chat_prompt(mw.interpretation_messages(request["text"] or "(media only)"))
        # it runs on the input's claim (borrowed: its pages stay promised to the input's own request)
        run.handle = self.service.submit(prompt, SamplingParams(max_tokens=mw.INTERPRET_MAX_TOKENS, temperature=0.0),
                                         surface="shared", lane="buffered", claim=run.claim, borrow=True)
        if run.stopped:
            run.handle.cancel()
        parts, finish = [], None
        async for delta in run.handle:
            parts.append(delta.text)
            finish = delta.finish_reason
        run.handle = None
        if finish == "cancelled" or run.stopped:
            return None
        return mw.interpretation_bytes("".join(parts))

    def _stopped(self, run: _Running, input_tokens: int, output_tokens: int) -> InputCompleted:
        """The completion of an input stopped before its end: past its deadline (504), else cancelled."""
        if run.expired:
            return InputCompleted(run.lineage, run.sequence, Execution.DEADLINE_EXCEEDED, input_tokens,
                                  output_tokens, finish="deadline",
                                  error=f"the execution deadline of {self.deadline:g} s passed")
        return InputCompleted(run.lineage, run.sequence, Execution.CANCELLED, input_tokens, output_tokens,
                              finish="cancelled")

    async def _stream(self, run: _Running, prompt_len: int) -> None:
        cap = self.runtime.capacities.result_bytes
        saved, pending = 0, bytearray()
        last_flush = float("-inf")  # the first bytes go out at once (time to first byte), later ones batched
        final = None
        over = False
        async for delta in run.handle:
            if not run.cancelled and self._record(run).cancel_requested:  # however the cancellation was saved
                run.cancelled = True
                run.handle.cancel()
            piece = delta.text.encode("utf-8")
            if saved + len(pending) + len(piece) > cap:
                piece = piece[:cap - saved - len(pending)]
                over = True
            pending += piece
            if delta.finish_reason is not None:
                final = delta
            elif over:
                run.handle.cancel()
            if pending and final is None and (len(pending) >= FLUSH_BYTES
                                              or time.monotonic() - last_flush >= FLUSH_SECONDS):
                if not await self._journal(run, OutputAppended(run.lineage, run.sequence, saved, bytes(pending))):
                    run.handle.cancel()
                    return
                saved += len(pending)
                pending.clear()
                last_flush = time.monotonic()
        assert final is not None
        if over:
            status, finish, error = Execution.COMPLETED, "result_limit", ""
        elif final.finish_reason == "error":
            status, finish, error = Execution.FAILED, "error", final.error or "engine error"
        else:
            status, finish, error = Execution.COMPLETED, final.finish_reason, ""
        if final.finish_reason == "cancelled" and not over:
            done = self._stopped(run, final.prompt_tokens or prompt_len, final.completion_tokens)
        else:
            done = InputCompleted(run.lineage, run.sequence, status, input_tokens=final.prompt_tokens or prompt_len,
                                  output_tokens=final.completion_tokens, finish=finish, error=error)
        # the last bytes and the terminal result in one write
        tail = [OutputAppended(run.lineage, run.sequence, saved, bytes(pending))] if pending else []
        await self._journal(run, *tail, done)
