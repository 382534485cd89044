"""Runs admitted inputs through the model service's engine and journals what happens.

Order for one input, each step journalled on the author's lineage before the next begins:
the admission (already saved when the executor hears of it) → a LEASE transfer (revision 3 row:
request index, execution slot, sequence, actor, retention mode 1) → the engine request (the same
Engine and paged KV pool as the stateless surfaces; its scheduler admits requests within its page
budget and queues the rest) → OUTPUT transfers, batches of result bytes as they come → one
COMPLETION transfer with the final input/output token counts and finish. A client going away
changes nothing here; only a saved cancellation stops an input. A runtime that stops mid-way
leaves the admission unfinished: the next boot journals it `interrupted` and never re-runs it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..state import Execution, ExecutionContext, ModelCaps
from ..state.execution import InputCompleted, LeaseApplied, OutputAppended, default_lease

if TYPE_CHECKING:
    from .runtime import SharedRuntime

log = logging.getLogger("aotx.runtime.executor")
FLUSH_BYTES = 256        # an output transfer is journalled once this many bytes wait …
FLUSH_SECONDS = 0.1      # … or this long after the previous one


def execution_context(service: Any) -> ExecutionContext:
    """The models and page grant a ModelService offers: its one model (text-only, no automatic
    memory) and, as page grant, the pages one request may hold (context window ∩ KV pool)."""
    engine = service.engine
    page_size = int(engine.config.page_size)
    grant = min(int(engine.config.num_pages), math.ceil(int(engine.max_model_len) / page_size))
    digest = bytes.fromhex(service.bundle.sha256)
    return ExecutionContext({service.model_id: ModelCaps(digest, media=False, automatic_memory=False)}, grant)


@dataclass
class _Running:
    lineage: bytes
    sequence: int
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


DEFAULT_DEADLINE_SECONDS = 300.0


@dataclass
class Executor:
    """`deadline`: seconds from the applied lease to the end of memory work, generation and result
    publication; past it the input ends `deadline_exceeded` (status 504)."""

    runtime: "SharedRuntime"
    service: Any
    deadline: float = DEFAULT_DEADLINE_SECONDS
    running: dict[tuple[bytes, int], _Running] = field(default_factory=dict)

    def _slot(self) -> int:
        used = {r.slot for r in self.running.values()}
        return next(i for i in range(len(used) + 1) if i not in used)

    def start(self, lineage: bytes, sequence: int) -> None:
        key = (lineage, sequence)
        if key in self.running:
            return
        run = self.running[key] = _Running(lineage, sequence)
        run.slot = self._slot()
        run.task = asyncio.get_running_loop().create_task(self._run(run))

    def cancel(self, lineage: bytes, sequence: int) -> None:
        run = self.running.get((lineage, sequence))
        if run is None:
            return
        run.cancelled = True
        if run.handle is not None:
            run.handle.cancel()

    async def stop(self) -> None:
        tasks = [r.task for r in self.running.values() if r.task is not None]
        for run in self.running.values():
            if run.handle is not None:
                run.handle.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.running.clear()

    def _record(self, run: _Running):
        state = self.runtime.state
        slot = state.receipt_slot(run.lineage, run.sequence)
        return None if slot is None else state.executions[slot]

    async def _journal(self, run: _Running, event) -> bool:
        failure = await self.runtime.journal_execution(run.lineage, [event])
        if failure is not None:
            log.warning("input %s/%d: journalling %s failed (%s); the next boot marks it interrupted",
                        run.lineage.hex(), run.sequence, type(event).__name__, failure.body)
            return False
        return True

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
            self.running.pop((run.lineage, run.sequence), None)

    async def _execute(self, run: _Running) -> None:
        record = self._record(run)
        if record is None or record.status.terminal:
            return
        if record.cancel_requested or run.cancelled:
            await self._journal(run, InputCompleted(run.lineage, run.sequence, Execution.CANCELLED,
                                                    finish="cancelled"))
            return
        if not await self._journal(run, LeaseApplied(run.lineage, default_lease(run.lineage, run.sequence, run.slot))):
            return
        # the execution deadline starts now that the lease is applied
        run.timer = asyncio.get_running_loop().call_later(self.deadline, run.expire)
        request = self._request(run)
        page_size = int(self.service.engine.config.page_size)
        from aotx.chat_types import ChatMessage
        from aotx.engine import SamplingParams
        prompt = self.service.chat_prompt([ChatMessage(role="user", content=request["text"])])
        room = record.page_limit * page_size - len(prompt)
        if room < 1:
            await self._journal(run, InputCompleted(
                run.lineage, run.sequence, Execution.FAILED, input_tokens=len(prompt), finish="error",
                error=f"the prompt needs {math.ceil((len(prompt) + 1) / page_size)} KV pages; "
                      f"this input's page limit is {record.page_limit}"))
            return
        params = SamplingParams(max_tokens=min(int(request["max_output_tokens"]), room),
                                temperature=float(request["temperature"]), top_p=float(request["top_p"]))
        if self._record(run).cancel_requested or run.cancelled or run.expired:
            await self._journal(run, self._stopped(run, len(prompt), 0))
            return
        try:
            run.handle = self.service.submit(prompt, params, surface="shared", lane="stream")
        except Exception as exc:  # RequestRejected (queue full, engine stopping, …)
            await self._journal(run, InputCompleted(run.lineage, run.sequence, Execution.FAILED,
                                                    input_tokens=len(prompt), finish="error",
                                                    error=f"the engine refused the input: {exc}"))
            return
        if run.cancelled or run.expired:
            run.handle.cancel()
        await self._stream(run, record, len(prompt))

    def _stopped(self, run: _Running, input_tokens: int, output_tokens: int) -> InputCompleted:
        """The completion of an input stopped before its end: past its deadline (504), else cancelled."""
        if run.expired:
            return InputCompleted(run.lineage, run.sequence, Execution.DEADLINE_EXCEEDED, input_tokens,
                                  output_tokens, finish="deadline",
                                  error=f"the execution deadline of {self.deadline:g} s passed")
        return InputCompleted(run.lineage, run.sequence, Execution.CANCELLED, input_tokens, output_tokens,
                              finish="cancelled")

    def _request(self, run: _Running) -> dict[str, Any]:
        import json
        state = self.runtime.state
        slot = state.receipt_slot(run.lineage, run.sequence)
        return json.loads(state.commands[slot])

    async def _stream(self, run: _Running, record, prompt_len: int) -> None:
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
            if pending and (final is not None or len(pending) >= FLUSH_BYTES
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
        elif final.finish_reason == "cancelled":
            done = self._stopped(run, final.prompt_tokens or prompt_len, final.completion_tokens)
            await self._journal(run, done)
            return
        elif final.finish_reason == "error":
            status, finish, error = Execution.FAILED, "error", final.error or "engine error"
        else:
            status, finish, error = Execution.COMPLETED, final.finish_reason, ""
        await self._journal(run, InputCompleted(run.lineage, run.sequence, status,
                                                input_tokens=final.prompt_tokens or prompt_len,
                                                output_tokens=final.completion_tokens, finish=finish, error=error))
