"""Pipelined command rounds: the next round is decided and sent while the previous one's append is in flight.

The command group commit (aotx.runtime.group_commit) ran one round at a time: a command that came
while a round's append was in flight waited for that whole round's ack, then for its own round.
Here the loop holds the writer's lock over a chain of rounds: while the oldest round's append is in
flight (at most `depth` rounds at once) it takes what is queued and begins the next round
(aotx.runtime.command_round.begin_round), planned behind the rounds in flight (planner `Ahead`):

* only on the acknowledged state — state still changes only by applying what the log acknowledged;
* a lineage with a command in flight (accepted, or decided on a pending state) waits: its next
  tick's guard, the expected last subject sequence, is the sequence its previous tick gets, known
  only on the ack; the guard of every flight is the one its lineage had when it was decided. A
  flight that landed whole and is applied (early: aotx.runtime.early_apply) holds nothing any more:
  the acknowledged state has its events, its guard and its transfer ids;
* a command whose decision would read what a round in flight changes waits, and every command
  waits unless every table keeps room after the rounds in flight took theirs (aotx.runtime.
  dependencies): nothing it reads can differ whether or not the rounds ahead land, so a failure of
  theirs (refusal, hold, lost ack, a stopped runtime) leaves its decision right. What waits is
  queued again, in the order the commands came (a lineage's commands keep their order).

Rounds finish in the order they began (finish_round: apply what landed, in stream order, then
answer): a round's acknowledged messages are applied only once every earlier round is applied, and
never past a message whose landing is unknown (writer.apply_landed; the read-back applies the rest
in order). A round is pipelined only while the writer is in sync and off hold and while no other
writer round (execution, stored, a read's catch-up) waits for the lock: then the chain drains and the
lock goes to it. In follow and lease mode rounds go one at a time unless a depth is asked for
(AOTX_COMMAND_PIPELINE, or the `depth` argument; `follow_depth`): measured on the 16-CPU host with two
runtimes (docs/PERFORMANCE.md, "Issue 15 part 5, session 10"), each runtime at a full core, pipelining
there made more and smaller rounds, each with its own catch-up, and applied the round ahead's messages the
long way (as pushed, not from their acks): 4,578 mutations/s against 5,309 one round at a time. Where it
is asked for, a pipelined round catches up with the log first, as every round does there
(aotx.runtime.command_round.begin_round; the follower's applier does not cut a chain short: the rounds
apply what it heard). `depth` 1 is one round at a time, as before (AOTX_COMMAND_PIPELINE
sets the depth for a process, for an A/B).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
from collections import deque
from typing import Any, Callable, Optional

from .command_round import Started, begin_round, finish_round
from .group_commit import GroupCommit, WriterLock
from .planner import Ahead, Cmd
from .round_stats import STATS, clock
from .writer import JournalWriter

log = logging.getLogger("aotx.runtime")
DEPTH_ENV = "AOTX_COMMAND_PIPELINE"
DEFAULT_DEPTH = 2
FOLLOW_DEPTH = 1   # follow and lease mode unless a depth is asked for (the environment, an argument): see below
SPLIT_MIN = 4


def depth_from(raw: Optional[str]) -> int:
    """Rounds in flight at once from the environment's text (≥ 1); unset, empty or not a count: the default."""
    text = (raw or "").strip()
    if text.isdigit() and int(text) >= 1:
        return int(text)
    if text:
        log.warning("%s=%r is not a round count >= 1: %d rounds in flight", DEPTH_ENV, raw, DEFAULT_DEPTH)
    return DEFAULT_DEPTH


class PipelinedCommands(GroupCommit[Cmd]):
    """The command group commit with pipelined rounds. `setting()`: the round's execution context and
    admission leases, read when a round begins."""

    def __init__(self, writer: JournalWriter, setting: Callable[[], tuple[Any, Any]], *, max_batch: int,
                 depth: Optional[int] = None) -> None:
        super().__init__(writer.lock, self._unused, name="command", max_batch=max_batch)
        self.lock: WriterLock = writer.lock
        self.writer, self.setting = writer, setting
        raw = os.environ.get(DEPTH_ENV)
        self.depth = depth_from(raw) if depth is None else max(1, int(depth))
        asked = depth is not None or bool((raw or "").strip())
        self.follow_depth = self.depth if asked else FOLLOW_DEPTH   # (writer.catch_up: follow and lease mode)
        self._order = itertools.count()
        self.split = False   # split a queue in two cohorts (measured slower on the 2-core sandbox: PERFORMANCE.md)
        self._wake: Optional[asyncio.Future] = None   # the chain waits on it: an arrival, or the oldest append done

    @staticmethod
    async def _unused(batch: list[Cmd]) -> None:
        raise AssertionError("pipelined rounds run in _chain")

    async def submit(self, item: Cmd) -> Any:
        item.order = next(self._order)
        self._wake_up()   # (the chain runs after this task queued the item)
        if not STATS.on:
            return await super().submit(item)
        item.queued = t0 = clock()
        try:
            return await super().submit(item)
        finally:
            STATS.add("cmd_in_runtime_s", clock() - t0)
            STATS.add("cmd_answered")

    def _wake_up(self, *_: Any) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _run(self) -> None:
        while self._queue:
            async with self.lock:
                await self._chain()

    def _may_pipeline(self) -> bool:
        w = self.writer
        return not (w.failed or w.unsynced or w.hold.active or self.lock.waiting)

    def _take(self, first: bool) -> list[Cmd]:
        n = len(self._queue) if self.max_batch is None else min(self.max_batch, len(self._queue))
        if first and self.split and self.depth > 1 and SPLIT_MIN <= n < self.writer.batch_min_messages:
            n = (n + 1) // 2   # the other half goes right behind it, decided while this one is in flight
        taken = [self._queue.popleft() for _ in range(n)]
        if STATS.on:
            now = clock()
            STATS.add("cmd_queue_s", sum(now - c.queued for c in taken))
            STATS.add("cmd_taken", len(taken))
        return taken

    def _applied(self, flying: deque[Started]) -> frozenset[bytes]:
        """Lineages of rounds in flight whose flight landed whole and is applied (aotx.runtime.early_apply)."""
        at = self.writer.applied_seq()
        return frozenset(f.lineage for s in flying for f, _ in s.flights
                         if f.error is None and f.landed and len(f.landed) == len(f.ticks) and f.landed[-1][0] <= at)

    def _requeue(self, items: list[Cmd]) -> None:
        """Queue commands again among those queued since, in the order they came."""
        if items:
            self._queue = deque(heapq.merge(sorted(items, key=_order), self._queue, key=_order))

    async def _chain(self) -> None:
        """Begin rounds while the oldest is in flight, finish them in order; return once none is in
        flight and nothing is queued, or another writer round waits for the lock."""
        flying: deque[Started] = deque()
        batch: list[Cmd] = []
        try:
            while True:
                depth = self.follow_depth if self.writer.catch_up else self.depth
                while self._queue and len(flying) < depth and (not flying or self._may_pipeline()):
                    batch = self._take(not any(s.append is not None and not s.append.done() for s in flying))
                    ahead = Ahead.of([s.plan.ahead for s in flying], self._applied(flying)) if flying else None
                    context, leases = self.setting()
                    try:
                        started = await begin_round(self.writer, batch, context, leases, ahead)
                    except Exception as exc:
                        _fail(self.name, batch, exc)
                        continue
                    batch = []
                    if started is None:
                        continue
                    self._requeue(started.plan.wait)
                    if started.append is None:   # nothing of it in flight (its answers are given)
                        if flying and started.plan.wait:
                            break   # what it holds waits on the rounds in flight: finish the oldest first
                        continue
                    flying.append(started)
                if not flying:
                    return
                oldest = flying[0]
                if oldest.append is not None and not oldest.append.done() and len(flying) < depth \
                        and self._may_pipeline():   # until its append is answered, or a command comes
                    self._wake = asyncio.get_running_loop().create_future()
                    oldest.append.add_done_callback(self._wake_up)
                    try:
                        await self._wake
                    finally:
                        self._wake = None
                    if not oldest.append.done():
                        continue
                try:
                    again = await finish_round(self.writer, oldest)
                except Exception as exc:   # (its waiting commands are queued again: not its to fail)
                    _fail(self.name, [c for c in oldest.batch if c not in oldest.plan.wait], exc)
                    again = []
                flying.popleft()
                self._requeue(again)
                if not flying and self.lock.waiting:
                    return
        except BaseException:   # cancelled (stop): the rounds in flight and the batch being begun
            for s in flying:
                if s.append is not None:
                    s.append.cancel()
                batch = batch + s.batch
            for item in batch:
                if not item.future.done():
                    item.future.cancel()
            raise


def _order(cmd: Cmd) -> int:
    return cmd.order


def _fail(name: str, batch: list[Cmd], exc: Exception) -> None:
    """A round that raised fails its unanswered commands with that exception; the chain goes on."""
    for item in batch:
        if not item.future.done():
            item.future.set_exception(exc)
    log.error("shared runtime %s round failed", name, exc_info=exc)
