"""Follow mode: several runtimes on one journal (docs/SCALE.md) — apply the others' messages as
the log pushes them.

A runtime alone on its journal applies what it wrote from the acks (aotx.runtime.writer). With
other runtimes writing other lineages of the same stream, it must also apply their messages, in
stream order, through the same projector, so that its state (and every read it serves) follows the
whole log and its state hash equals a fresh replay's. The follower keeps an ordered consumer on the
stream from the last message applied. Its receiving loop never waits for the writer's lock: every
message it hears that is not applied yet joins `heard` (in stream order), and an applier task feeds
what was heard under the lock (rounds and the follower take turns; a chain of command rounds is not
cut short for it, since every command round applies what was heard first), at most RUN messages a hold, the
projector's tables unlocked once a run (Projector.applying): the next one in order is fed as it came,
anything beyond a hole makes the writer read the hole back first. Messages this runtime wrote itself
are normally applied already from their acks and are skipped. Observers hear of every applied message,
so the broker wakes this runtime's SSE readers for the other runtimes' writes too.

A round that must apply the log up to a stream sequence first (the pre-round catch-up, or another
writer's messages between its own acknowledged ones: aotx.runtime.catch_up) takes them from `heard`
under the lock it holds (`catch_up`), waiting a little for the consumer to push them; only what does
not come in that time is read back from the log (a STREAM.INFO and direct gets: round trips the
pushed messages make unnecessary). Either way the same messages are applied, in stream order.

A consumer that fails (the connection lost, the stream leader moving) is made again from the last
message applied, after `retry` seconds; nothing is lost, since it always starts where the state
stands. The follower does not decide anything and writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Optional

import nats.errors

from eventlog import EventLogError

from .round_stats import STATS, clock
from .stopping import cancel_and_wait

log = logging.getLogger("aotx.runtime")
RETRY_SECONDS = 0.5
RUN = 256   # messages applied under one hold of the writer's lock by the applier, at most


class Follower:
    def __init__(self, writer, retry: float = RETRY_SECONDS) -> None:
        self.writer, self.retry = writer, retry
        self.applied = 0          # messages of other writers the follower applied (for tests and stats)
        self.runs = 0             # holds of the writer's lock in which its applier applied them (each ≤ RUN)
        self.heard: deque = deque()   # messages heard and not applied yet, in stream order
        self._arrived: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task] = None
        self._applier: Optional[asyncio.Task] = None
        self._silent = False   # a catch-up's wait ran out and nothing was heard since: the next does not wait

    def start(self) -> None:
        if self._task is None:
            self._arrived = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="aotx journal follower")

    async def stop(self) -> None:
        task, self._task = self._task, None
        applier, self._applier = self._applier, None
        await cancel_and_wait([task, applier], what="journal follower")

    async def _run(self) -> None:
        w = self.writer
        while not w.failed:
            sub = None
            try:
                recorder = await w.connection.ensure()
                sub = await recorder.subscribe(w.applied_seq() + 1, headers=False)   # (subject, seq, data read)
                self.heard.clear()   # (a new consumer starts where the state stands)
                waiting = getattr(sub, "take_waiting", None)   # (a subscription without it: one at a time)
                async for msg in sub:
                    run = [msg] if waiting is None else [msg, *waiting(RUN - 1)]
                    if w.failed:
                        return   # the runtime stopped (its writer says why)
                    self._drop_applied()
                    if run[-1].seq <= w.applied_seq():
                        continue
                    self.heard.extend(run)
                    self._arrived.set()
                    self._silent = False
                    if self._applier is None or self._applier.done():
                        self._applier = asyncio.get_running_loop().create_task(self._apply_heard())
            except (EventLogError, nats.errors.Error, OSError, asyncio.TimeoutError) as exc:
                log.info("journal follower: %s: %s; following again from seq %d", type(exc).__name__, exc,
                         w.applied_seq() + 1)
            finally:
                if sub is not None:
                    await _close(sub)
            await asyncio.sleep(self.retry)

    async def _apply_heard(self) -> None:
        """Apply what was heard, RUN messages a hold of the writer's lock, until nothing heard is left
        to apply (or no progress is made: the next message heard starts this again)."""
        w = self.writer
        while not w.failed and self._left():
            t0 = clock() if STATS.on else 0.0
            await w.lock.acquire_behind()   # (a chain of command rounds is not asked to let it in)
            try:
                before = self.applied
                if STATS.on:
                    t1 = clock()
                    STATS.add("follow_lock_wait_s", t1 - t0)
                    STATS.add("follow_runs")
                if self._left():
                    self.runs += 1
                    await self._feed(None, RUN)
                if STATS.on:
                    STATS.add("follow_apply_s", clock() - t1)
                    STATS.add("follow_msgs", self.applied - before)
            finally:
                w.lock.release()
            if self.applied == before:
                return

    def _left(self) -> bool:
        """Is anything heard not applied yet? (What was applied meanwhile is dropped from `heard`.)"""
        self._drop_applied()
        return bool(self.heard) and self.heard[-1].seq > self.writer.applied_seq()

    def _drop_applied(self) -> None:
        """Drop what others applied meanwhile from the front of `heard` (this runtime's own messages from
        their acks, a read-back): nothing else drops them while no other writer's message comes to be
        fed — a runtime alone on its journal in lease mode kept each of its own messages the consumer
        pushed before the ack, bytes and all, for the life of the consumer."""
        heard, applied = self.heard, self.writer.applied_seq()
        while heard and heard[0].seq <= applied:
            heard.popleft()

    async def _feed(self, upto: Optional[int], limit: Optional[int] = None) -> None:
        """Under the writer's lock: feed heard messages in order up to stream sequence `upto` (None: all),
        at most `limit`; a hole before the next one heard is read back first. Stops at a failure (the
        writer's `failed` says why) or a read-back that did not answer."""
        w, heard, fed = self.writer, self.heard, 0
        while heard and (limit is None or fed < limit) and not w.failed:
            applied = w.applied_seq()
            while heard and heard[0].seq <= applied:   # a round applied it meanwhile (ours, or read back)
                heard.popleft()
            if not heard or (upto is not None and heard[0].seq > upto):
                return
            if heard[0].seq > applied + 1:   # a hole (a consumer made again): read it back in order first
                if not await w.read_back(upto=heard[0].seq - 1) or w.applied_seq() < heard[0].seq - 1:
                    return
                continue
            t0, was = (clock() if STATS.on else 0.0), fed
            with w.projector.applying():   # (nothing awaits inside)
                while heard and heard[0].seq == w.applied_seq() + 1 and (upto is None or heard[0].seq <= upto) \
                        and (limit is None or fed < limit):
                    msg = heard.popleft()
                    self.applied += 1
                    fed += 1
                    if not w.feed_followed(msg.subject, msg.seq, msg.data):
                        return
            if STATS.on:
                STATS.add("follow_fed_s", clock() - t0)
                STATS.add("follow_fed", fed - was)
            w.early.drain(w)   # own acknowledged ticks that waited for these (aotx.runtime.early_apply)

    async def catch_up(self, upto: int, wait: float) -> bool:
        """Under the writer's lock: apply the log up to stream sequence `upto` from what the consumer
        pushes, waiting at most `wait` seconds for it to arrive. True once applied that far; False
        otherwise (not following, the time passed, a failure): the caller reads the rest back. Once a
        wait ran out, later calls do not wait until the consumer pushes again (a consumer that stalls
        after a node change, 10-20 s: docs/SCALE.md "Reads hold every acknowledged write")."""
        w = self.writer
        if self._task is None or self._task.done() or self._arrived is None:
            return w.applied_seq() >= upto
        deadline = None
        while True:
            await self._feed(upto)
            if w.applied_seq() >= upto or w.failed:
                return w.applied_seq() >= upto
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait if deadline is None else deadline
            left = deadline - loop.time()
            if left <= 0 or self._silent:   # (a stalled consumer costs one wait, not one a round)
                return False
            self._arrived.clear()   # (nothing arrived since the feed above: no await in between)
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                self._silent = True
                return False


async def _close(sub) -> None:
    try:
        await sub.close()
    except (nats.errors.Error, OSError) as exc:
        log.debug("journal follower: closing its consumer: %s", type(exc).__name__)
