"""Follow mode: several runtimes on one journal (docs/SCALE.md) — apply the others' messages as
the log pushes them.

A runtime alone on its journal applies what it wrote from the acks (aotx.runtime.writer). With
other runtimes writing other lineages of the same stream, it must also apply their messages, in
stream order, through the same projector, so that its state (and every read it serves) follows the
whole log and its state hash equals a fresh replay's. The follower keeps an ordered consumer on the
stream from the last message applied; each message it hears that is not applied yet is applied
under the writer's lock (rounds and the follower take turns): the next one in order is fed as it
came, anything beyond a hole makes the writer read the hole back first. Messages already waiting in
the consumer (a follower that fell behind) are taken with the one it heard, up to RUN, and applied
as one run: one hold of the lock, the projector's tables unlocked once (Projector.applying). Messages this runtime
wrote itself are normally applied already from their acks and are skipped. Observers hear of every
applied message, so the broker wakes this runtime's SSE readers for the other runtimes' writes too.

A consumer that fails (the connection lost, the stream leader moving) is made again from the last
message applied, after `retry` seconds; nothing is lost, since it always starts where the state
stands. The follower does not decide anything and writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

import nats.errors

from eventlog import EventLogError

from .stopping import cancel_and_wait

log = logging.getLogger("aotx.runtime")
RETRY_SECONDS = 0.5
RUN = 256   # messages already waiting applied under one hold of the writer's lock, at most


class Follower:
    def __init__(self, writer, retry: float = RETRY_SECONDS) -> None:
        self.writer, self.retry = writer, retry
        self.applied = 0          # messages of other writers the follower applied (for tests and stats)
        self.runs = 0             # holds of the writer's lock in which it applied them (each a run of ≤ RUN)
        self._task: Optional[asyncio.Task] = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="aotx journal follower")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait([task], what="journal follower")

    async def _run(self) -> None:
        w = self.writer
        while not w.failed:
            sub = None
            try:
                recorder = await w.connection.ensure()
                sub = await recorder.subscribe(w.applied_seq() + 1)
                waiting = getattr(sub, "take_waiting", None)   # (a subscription without it: one at a time)
                async for msg in sub:
                    run = [msg] if waiting is None else [msg, *waiting(RUN - 1)]
                    if run[-1].seq > w.applied_seq() and not await self._apply(run):
                        return   # the runtime stopped (its writer says why)
            except (EventLogError, nats.errors.Error, OSError, asyncio.TimeoutError) as exc:
                log.info("journal follower: %s: %s; following again from seq %d", type(exc).__name__, exc,
                         w.applied_seq() + 1)
            finally:
                if sub is not None:
                    await _close(sub)
            await asyncio.sleep(self.retry)

    async def _apply(self, run: list) -> bool:
        """Apply a run of messages in order under one hold of the writer's lock; False once the runtime stopped."""
        w = self.writer
        async with w.lock:
            self.runs += 1
            at = 0
            while at < len(run):
                at, hole = self._feed_run(run, at)
                if hole is _STOPPED:
                    return False
                if hole is not None:   # a hole (a consumer made again): read it back in order, up to this message
                    if not await w.read_back(upto=hole.seq) and w.failed:
                        return False
            return True

    def _feed_run(self, run: list, at: int):
        """Feed run[at:] in order, the tables unlocked once (Projector.applying: nothing awaits inside),
        up to the end (None), a message beyond a hole (that message), or a failure (_STOPPED); and where it stopped."""
        w = self.writer
        with w.projector.applying():
            while at < len(run):
                msg = run[at]
                applied = w.applied_seq()
                if msg.seq > applied + 1:
                    return at + 1, msg
                at += 1
                if msg.seq <= applied:      # a round applied it meanwhile (ours, or read back)
                    continue
                self.applied += 1
                if not w.feed_followed(msg.subject, msg.seq, msg.data):
                    return at, _STOPPED
        return at, None


_STOPPED = object()


async def _close(sub) -> None:
    try:
        await sub.close()
    except (nats.errors.Error, OSError) as exc:
        log.debug("journal follower: closing its consumer: %s", type(exc).__name__)
