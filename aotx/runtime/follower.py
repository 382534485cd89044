"""Follow mode: several runtimes on one journal (docs/SCALE.md) — apply the others' messages as
the log pushes them.

A runtime alone on its journal applies what it wrote from the acks (aotx.runtime.writer). With
other runtimes writing other lineages of the same stream, it must also apply their messages, in
stream order, through the same projector, so that its state (and every read it serves) follows the
whole log and its state hash equals a fresh replay's. The follower keeps an ordered consumer on the
stream from the last message applied; each message it hears that is not applied yet is applied
under the writer's lock (rounds and the follower take turns): the next one in order is fed as it
came, anything beyond a hole makes the writer read the hole back first. Messages this runtime
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


class Follower:
    def __init__(self, writer, retry: float = RETRY_SECONDS) -> None:
        self.writer, self.retry = writer, retry
        self.applied = 0          # messages of other writers the follower applied (for tests and stats)
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
                async for msg in sub:
                    if msg.seq > w.applied_seq() and not await self._apply(msg):
                        return   # the runtime stopped (its writer says why)
            except (EventLogError, nats.errors.Error, OSError, asyncio.TimeoutError) as exc:
                log.info("journal follower: %s: %s; following again from seq %d", type(exc).__name__, exc,
                         w.applied_seq() + 1)
            finally:
                if sub is not None:
                    await _close(sub)
            await asyncio.sleep(self.retry)

    async def _apply(self, msg) -> bool:
        w = self.writer
        async with w.lock:
            applied = w.applied_seq()
            if msg.seq <= applied:      # a round applied it meanwhile (ours, or read back)
                return True
            if msg.seq > applied + 1:   # a hole (a consumer made again): read it back in order
                return await w.read_back(upto=msg.seq) or not w.failed
            self.applied += 1
            return w.feed_followed(msg.subject, msg.seq, msg.data)


async def _close(sub) -> None:
    try:
        await sub.close()
    except (nats.errors.Error, OSError) as exc:
        log.debug("journal follower: closing its consumer: %s", type(exc).__name__)
