"""Background runs of /v1/responses (`background: true`): generations owned by the app, not by the
request that started them — a client that disconnects stops nothing.

A run feeds its engine handle through the background stream machine (background_stream), saves every
event on the journal in batches (event_saver) and ends with one FinishResponse: `completed` /
`incomplete` / `failed` as the generation ended, `cancelled` when POST /v1/responses/{id}/cancel asked
before the generation's end (the engine handle is cancelled at once: the engine stops generating for
it), `failed` with the refusal when its events could not be saved.

Shutdown (SIGTERM): the app's drain gives running requests, background runs included, the grace
(`--shutdown-grace`); then the engine stops and a run still generating ends `failed` with the
surface's shutting-down error ("The server is shutting down; the generation was stopped before it
finished."), journalled before the shared runtime stops (`finish`, after the drain). A run is never
started again by a later boot. After kill -9 the boot journals what was running as `failed`,
"interrupted by a restart" (aotx.stored.recovery).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Optional

from aotx.runtime.stopping import cancel_and_wait
from aotx.stored import FinishResponse, Reason, ResponseStatus, StoredRefusal
from aotx.stored.port import StoredJournal
from api.surfaces.responses.background_stream import BackgroundProjector
from api.surfaces.responses.event_saver import EventSaver, retrying

log = logging.getLogger("aotx.background")
EXT = "aotx.background_runs"
FINISH_TIMEOUT = 10.0     # seconds the shutdown waits for runs to journal their end, after the engine stopped


def _encoded(events) -> list[bytes]:
    return [event.encode() for event in events]


class BackgroundRun:
    def __init__(self, port: StoredJournal, identity: str, response_id: str, handle,
                 projector: BackgroundProjector) -> None:
        self.port, self.identity, self.response_id = port, identity, response_id
        self.handle, self.projector = handle, projector
        self.cancelled = False
        self.task: Optional[asyncio.Task] = None

    def cancel(self) -> None:
        """Stop generating (a no-op once the generation has produced its end: that end is kept)."""
        if not self.projector.done:
            self.cancelled = True
            self.handle.cancel()

    async def run(self) -> None:
        saver = EventSaver(self.port, self.identity, self.response_id)
        try:
            await self._generate(saver)
        finally:
            self.handle.cancel()   # a no-op for an ended request
        refusal = await saver.close()
        await self._finish(self._terminal(refusal))

    async def _generate(self, saver: EventSaver) -> None:
        p = self.projector
        saver.add(_encoded(p.open()))
        try:
            async for delta in self.handle:
                if self.cancelled or saver.refusal is not None:
                    return
                saver.add(_encoded(p.feed(0, delta)))
                if p.done:
                    return
            if not self.cancelled:
                saver.add(_encoded(p.fail("generation ended early")))
        except Exception as exc:  # the engine raised mid-run: the run ends failed, its events saying so
            log.exception("background response %s: generation failed", self.response_id)
            saver.add(_encoded(p.fail(f"generation failed: {exc}")))

    def _terminal(self, refusal: Optional[StoredRefusal]) -> FinishResponse:
        p, rid = self.projector, self.response_id
        if refusal is not None:
            items, usage = p.partial()
            return FinishResponse(rid, ResponseStatus.FAILED, items, usage, error={
                "code": "server_error", "message": f"The response's events could not be saved: {refusal.message}"})
        if self.cancelled or p.final is None:
            items, usage = p.partial()
            return FinishResponse(rid, ResponseStatus.CANCELLED, items, usage)
        final = p.final
        return FinishResponse(rid, ResponseStatus[final["status"].upper()], final["output"], final["usage"],
                              final["error"], final["incomplete_details"])

    async def _finish(self, finish: FinishResponse) -> None:
        out = await retrying(lambda: self.port.record(self.identity, finish), f"response {self.response_id}")
        if isinstance(out, StoredRefusal) and out.reason is not Reason.FINISHED:
            # the next boot journals it as interrupted (aotx.stored.recovery): never left running
            log.warning("background response %s: its end (%s) could not be journalled: %s", self.response_id,
                        finish.status.wire, out.message)


class BackgroundRuns:
    """The app's running background responses, by response id."""

    def __init__(self) -> None:
        self._runs: dict[str, BackgroundRun] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def start(self, run: BackgroundRun) -> None:
        run.task = asyncio.get_running_loop().create_task(run.run(), name=f"aotx-background-{run.response_id}")
        self._runs[run.response_id] = run
        run.task.add_done_callback(lambda task, rid=run.response_id: self._ended(rid, task))

    def _ended(self, response_id: str, task: asyncio.Task) -> None:
        self._runs.pop(response_id, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("background response %s ended with %r", response_id, task.exception(),
                      exc_info=task.exception())

    def cancel(self, response_id: str) -> bool:
        """Cancel the run of this response; False when it does not run here."""
        run = self._runs.get(response_id)
        if run is None:
            return False
        run.cancel()
        return True

    async def finish(self, timeout: float = FINISH_TIMEOUT) -> None:
        """Wait (bounded) for every run to journal its end; cancel those still going after `timeout`."""
        tasks = [r.task for r in self._runs.values() if r.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            log.warning("%d background run(s) had not ended %.1f s after the engine stopped", len(pending), timeout)
            await cancel_and_wait(pending, what="background run")


def runs_of(app) -> BackgroundRuns:
    runs = app.extensions.get(EXT)
    if runs is None:
        runs = app.extensions[EXT] = BackgroundRuns()
    return runs
