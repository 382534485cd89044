"""One leased input's run: memory work, the engine request, its output and its end, journalled.

After its lease is applied: memory work (aotx.runtime.memory_work: recall into the prompt by the
lease revision, mode 2 interpretation by the same model; the MEMORY transfer retaining the input is
written with its first OUTPUT, or, where its prompt did not wait for the embedding, with its first
write once the vector came, at the latest its COMPLETION) → the engine request (the same Engine and paged KV pool as the
stateless surfaces) → OUTPUT transfers, batches of result bytes as they come → the last bytes and
one COMPLETION transfer (final token counts, finish) in one write. Only a saved cancellation or
the execution deadline stops it; a bug ends it `failed`, never looking alive.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from typing import Any, Awaitable, Callable

from ..sampling_defaults import resolved
from ..state import Execution
from ..state.execution import InputCompleted, OutputAppended
from . import memory_work as mw
from .early_start import drop_early
from .execution_port import ExecutionSettings, ProjectionReads
from .input_journal import InputJournal
from .input_trace import stamp
from .running import PendingMemory, Running

log = logging.getLogger("aotx.runtime.executor")
FLUSH_BYTES = 256        # an output transfer is journalled once this many bytes wait …
FLUSH_SECONDS = 0.1      # … or this long after the previous one


class InputRunner:
    def __init__(self, service: Any, reads: ProjectionReads, settings: ExecutionSettings, journal: InputJournal,
                 embed: Callable[[bytes], Awaitable[Any]], author_grants: Callable[[bytes], Any],
                 kick: Callable[[], None]) -> None:
        self.service, self.reads, self.settings, self.journal = service, reads, settings, journal
        self.embed, self.author_grants, self.kick = embed, author_grants, kick

    async def run(self, run: Running, ended: Callable[[Running], None]) -> None:
        try:
            await self._execute(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not leave the input looking alive: record it as failed
            log.exception("input %s/%d failed", run.lineage.hex(), run.sequence)
            if run.handle is not None:
                run.handle.cancel()   # (a no-op for an ended request)
            await self._memory_or_none(run)
            record = run.record(self.reads.state)
            if record is not None and not record.status.terminal:
                await self.journal.write(run, InputCompleted(run.lineage, run.sequence, Execution.FAILED,
                                                             error="internal error while executing the input"))
        finally:
            ended(run)

    async def _execute(self, run: Running) -> None:
        record = run.record(self.reads.state)
        if record is None or record.status.terminal:
            return
        if record.cancel_requested or run.stopped:
            await self.journal.write(run, self.stopped(run, 0, 0))
            return
        request = run.request
        memory = await self._memory(run, record)
        if memory is None:
            return
        prompt = run.prompt(self.service, mw.prompt_messages(memory, request.text))
        stamp(run.lineage, run.sequence, "prompt")
        page_size = int(self.service.engine.config.page_size)
        room = record.page_limit * page_size - len(prompt)
        if room < 1:
            await self.journal.write(run, InputCompleted(
                run.lineage, run.sequence, Execution.FAILED, input_tokens=len(prompt), finish="error",
                error=f"the prompt needs {math.ceil((len(prompt) + 1) / page_size)} KV pages; "
                      f"this input's page limit is {record.page_limit}"))
            return
        from aotx.engine import SamplingParams
        # an absent temperature / top_p is the served model's default (an input journalled by revision 1
        # has 0.0 / 1.0 in its bytes: greedy, as it always ran)
        temperature, top_p = resolved(self.service.sampling_defaults, request.temperature, request.top_p)
        params = SamplingParams(max_tokens=min(int(request.max_output_tokens), room),
                                temperature=temperature, top_p=top_p)
        if run.record(self.reads.state).cancel_requested or run.stopped:
            await self.journal.write(run, self.stopped(run, len(prompt), 0))
            return   # (an early request goes when the run ends: executor._ended)
        if run.early_prompt is not None:   # asked of the engine before its lease was applied (early_start)
            if run.early_prompt == prompt:
                run.early_prompt = None    # that request is this input's: its deltas wait in the handle
                if run.stopped:
                    run.handle.cancel()
                await self._stream(run, len(prompt))
                return
            drop_early(run)   # the applied state gave another prompt (memory became recallable): ask again
        claim, run.claim = run.claim, None   # the request takes its claim over (a refused one releases it)
        try:
            run.handle = self.service.submit(prompt, params, surface="shared", lane="stream", claim=claim)
            stamp(run.lineage, run.sequence, "submitted")
        except Exception as exc:  # RequestRejected (queue full, engine stopping, …)
            self.service.engine.release_claim(claim)   # (idempotent: a refusal has released it)
            await self.journal.write(run, InputCompleted(run.lineage, run.sequence, Execution.FAILED,
                                                         input_tokens=len(prompt), finish="error",
                                                         error=f"the engine refused the input: {exc}"))
            return
        finally:
            self.kick()
        if run.stopped:
            run.handle.cancel()
        await self._stream(run, len(prompt))

    async def _memory(self, run: Running, record):
        """Embed, recall, interpret (mode 2) and retain. The rendered memory for the prompt, or None
        when the input ended here (cancelled, past its deadline, or its journal failed). Where nothing
        can be recalled (mode 1) the prompt does not wait for the embedding, nor does the output: the
        memory input goes with the first write after it came, at the latest the input's end (`run.memory_later`)."""
        state = self.reads.state
        place = mw.input_place(state, state.receipt_slot(run.lineage, run.sequence))
        text = mw.retained_text(run.request)
        embedding = run.embedding if run.embedding is not None else asyncio.ensure_future(self.embed(text))
        mode = int(record.retention_mode)
        grants = self.author_grants(run.lineage)   # the author's rights now (not those at admission)
        if mode != 2 and not mw.can_recall(state, self.reads.memory, place.space, run.lineage, grants):
            return await self._nothing_to_recall(run, record, place, mode, text, embedding)
        vector = await embedding
        stamp(run.lineage, run.sequence, "embedded")
        # the author's rights now, after the wait (not those at admission)
        rendered = mw.recall_for(self.reads.state, self.reads.memory, place.space, run.lineage,
                                 self.author_grants(run.lineage), vector, int(record.lease_revision))
        interpretation = None
        if mode == 2:
            interpretation = await self._interpret(run)
            if interpretation is None:
                await self.journal.write(run, self.stopped(run, 0, 0))
                return None
        if run.record(self.reads.state).cancel_requested or run.stopped:
            await self.journal.write(run, self.stopped(run, 0, 0))
            return None
        if not self.reads.memory.has_retained(place.op.lineage, place.op.operation):
            # its prompt does not depend on its own memory: generation starts now, and the memory
            # input goes into the log with the input's next write (its first output, or its end)
            run.memory_event = mw.retention(place, run.lineage, mode, text, vector, interpretation)
        else:
            run.retained = True
        return rendered

    async def _nothing_to_recall(self, run: Running, record, place: mw.InputPlace, mode: int, text: bytes,
                                 embedding: asyncio.Future):
        """The empty recall, rendered now; the memory input (which needs the vector) is built by
        `run.memory_later` once the embedding came, for the input's first write after that, at the latest
        its end (aotx.runtime.input_journal): meanwhile the engine works on the prompt."""
        if run.record(self.reads.state).cancel_requested or run.stopped:
            embedding.cancel()
            await self.journal.write(run, self.stopped(run, 0, 0))
            return None
        if self.reads.memory.has_retained(place.op.lineage, place.op.operation):
            embedding.cancel()
            run.retained = True
        else:
            run.memory_later = PendingMemory(
                embedding, lambda vector: mw.retention(place, run.lineage, mode, text, vector, None))
            embedding.add_done_callback(lambda _: stamp(run.lineage, run.sequence, "embedded"))
        return mw.nothing_recalled(int(record.lease_revision))

    async def _memory_or_none(self, run: Running) -> None:
        """Before a failed input's end: its memory input where its embedding came, else none."""
        later, run.memory_later = run.memory_later, None
        if later is not None:
            try:
                run.memory_event = await later.event()
            except Exception as exc:   # what failed may be that embedding: the input ends without memory
                log.warning("input %s/%d: no memory input, its embedding failed: %s", run.lineage.hex(),
                            run.sequence, exc)

    async def _interpret(self, run: Running) -> bytes | None:
        """Mode 2: the same model's interpretation of the input (None when stopped meanwhile)."""
        from aotx.engine import SamplingParams
        prompt = self.service.chat_prompt(mw.interpretation_messages(run.request.text or "(media only)"))
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

    def stopped(self, run: Running, input_tokens: int, output_tokens: int) -> InputCompleted:
        """The completion of an input stopped before its end: past its deadline (504), else cancelled."""
        if run.expired:
            return InputCompleted(run.lineage, run.sequence, Execution.DEADLINE_EXCEEDED, input_tokens,
                                  output_tokens, finish="deadline",
                                  error=f"the execution deadline of {self.settings.deadline:g} s passed")
        return InputCompleted(run.lineage, run.sequence, Execution.CANCELLED, input_tokens, output_tokens,
                              finish="cancelled")

    async def _stream(self, run: Running, prompt_len: int) -> None:
        cap = self.settings.result_bytes
        saved, pending = 0, bytearray()
        loop = asyncio.get_running_loop()
        last_flush = float("-inf")  # the first bytes go out at once (time to first byte), later ones batched
        final = None
        over = False
        while final is None:
            # woken once a write is due — FLUSH_BYTES wait (or the result cap is passed), FLUSH_SECONDS went
            # by since the last write and a delta came — or at the end; not at every engine step. Past
            # the cap the request is cancelled: only its final delta wakes the run (what waits goes with it)
            if over:
                deltas = await run.handle.gather(sys.maxsize)
            else:
                want = max(1, min(FLUSH_BYTES - len(pending), cap - saved - len(pending) + 1))
                deltas = await run.handle.gather(want, last_flush + FLUSH_SECONDS)
            if not deltas:
                break
            if not saved and not pending:
                stamp(run.lineage, run.sequence, "first_delta")
            if not run.cancelled and run.record(self.reads.state).cancel_requested:  # however it was saved
                run.cancelled = True
                run.handle.cancel()
            for delta in deltas:
                piece = delta.text.encode("utf-8")
                if saved + len(pending) + len(piece) > cap:
                    piece = piece[:max(0, cap - saved - len(pending))]
                    over = True
                pending += piece
                if delta.finish_reason is not None:
                    final = delta
                    stamp(run.lineage, run.sequence, "last_delta")
                elif over:
                    run.handle.cancel()
            if pending and final is None and not over and (len(pending) >= FLUSH_BYTES
                                                           or loop.time() - last_flush >= FLUSH_SECONDS):
                if not await self.journal.write(run, OutputAppended(run.lineage, run.sequence, saved, bytes(pending))):
                    run.handle.cancel()
                    return
                if not saved:
                    stamp(run.lineage, run.sequence, "first_output")
                saved += len(pending)
                pending.clear()
                last_flush = loop.time()
        assert final is not None
        if over:
            status, finish, error = Execution.COMPLETED, "result_limit", ""
        elif final.finish_reason == "error":
            status, finish, error = Execution.FAILED, "error", final.error or "engine error"
        else:
            status, finish, error = Execution.COMPLETED, final.finish_reason, ""
        if final.finish_reason == "cancelled" and not over:
            done = self.stopped(run, final.prompt_tokens or prompt_len, final.completion_tokens)
        else:
            done = InputCompleted(run.lineage, run.sequence, status, input_tokens=final.prompt_tokens or prompt_len,
                                  output_tokens=final.completion_tokens, finish=finish, error=error)
        # the last bytes and the terminal result in one write
        tail = [OutputAppended(run.lineage, run.sequence, saved, bytes(pending))] if pending else []
        if await self.journal.write(run, *tail, done):
            stamp(run.lineage, run.sequence, "completed")
