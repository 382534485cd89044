"""The broker: delivers each applied change only to the stream readers it concerns.

A reader subscribes by operation (`Broker.operation(op)`) or by conversation
(`Broker.conversation(con)`) *before* its first read, and closes the subscription when its stream
ends (also a subscription its holder dropped goes away: the broker holds them weakly). The broker is
told what changed as `Targets` (aotx.runtime.targets: from the runtime's own observer in process,
from the runtime's announcements in a gateway) and puts, into the bounded asyncio queue of each
concerned subscription, either the delta (an operation's output or completion event, in journal
order) or a wake-up (read again). The writer never waits: a full queue is emptied and marked for
resync (the reader reads again from its cursor, so it still gets every byte). A reader takes what
is queued at once (`wait`, then `take`) and rechecks its rights with every read it makes.

A change of member rights names a space (`Targets.spaces`): the broker learns, once per subscription
and only when such a change comes, which space its operation or conversation lies in (`Targets.where`,
aotx.runtime.space_readers) and keeps it, so each change wakes that space's subscriptions by one lookup.
A subscription whose operation or conversation is not in the state (not yet, or retired) is in no space
(as before: only what the state holds was woken) and is asked again at the next change. With no subscriptions, `listening()` says so and the runtime's change
feed skips the message altogether.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Iterable

from ..state import IdError, IdKind, operation_sequence, parse_id
from .space_readers import SpaceKey, Where
from .targets import ConKey, OpKey, Targets

DEFAULT_QUEUE = 64      # queued deltas or wake-ups per reader before it must resync
_WAKE = object()        # "read again" (the queue then holds nothing else that matters)


def _settle(waiter: asyncio.Future, value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)


@dataclass
class BrokerStats:
    """Counters for tests and benchmarks."""

    subscribed: int = 0     # subscriptions made
    pushed: int = 0         # deltas and wake-ups queued
    wakeups: int = 0        # takes by readers (each a reader woken)
    overflows: int = 0      # queues that filled up (their readers resync)
    everyone: int = 0       # changes that woke every reader (resync_all: a boot, grants, announcements lost)


@dataclass
class Batch:
    """What a reader took: `resync` — read again (a wake-up, or the queue overflowed); `deltas` —
    the execution events of its operation, in journal order, queued since it last took."""

    resync: bool
    deltas: list = field(default_factory=list)


class Subscription:
    def __init__(self, broker: "Broker", label: str, op: OpKey | None, con: ConKey | None, size: int) -> None:
        self._broker, self.label, self.op, self.con = broker, label, op, con
        self.space: SpaceKey | None = None   # the space its operation or conversation lies in, once known
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=max(1, size))
        self._waiter: asyncio.Future | None = None   # the reader's wait, settled by the next push
        self._wake_queued = False
        self.overflowed = False
        self.closed = False
        self.wakeups = 0        # takes (test hook)
        self.resyncs = 0        # takes that were to read again because the queue overflowed
        self.reads = 0          # reads its reader made (the reader counts them)
        self.pushes = 0         # of which delivered bytes the broker pushed (a rights-and-status read)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pending(self) -> bool:
        return not self._queue.empty()

    def push(self, item: object) -> None:
        """Queue a delta (or _WAKE); never blocks. After a queued wake-up nothing more is needed."""
        if self.closed or self._wake_queued:
            return
        self._broker.stats.pushed += 1
        if item is _WAKE:
            self._wake_queued = True
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._broker.stats.overflows += 1
            while not self._queue.empty():
                self._queue.get_nowait()
            self.overflowed = self._wake_queued = True
            self._queue.put_nowait(_WAKE)
        if self._waiter is not None:
            _settle(self._waiter, True)

    def wake(self) -> None:
        self.push(_WAKE)

    async def wait(self, timeout: float) -> bool:
        """Until something is queued (True) or `timeout` seconds passed (False); takes nothing."""
        if self.pending:
            return True
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _settle, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def take(self) -> Batch:
        """Everything queued, at once."""
        queue = self._queue
        items = []
        while not queue.empty():
            items.append(queue.get_nowait())
        resync = self.overflowed or self._wake_queued
        if self.overflowed:
            self.resyncs += 1
        self.overflowed = self._wake_queued = False
        self.wakeups += 1
        self._broker.stats.wakeups += 1
        return Batch(resync, [item for item in items if item is not _WAKE] if resync else items)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._broker._forget(self)


class Broker:
    def __init__(self, queue_size: int = DEFAULT_QUEUE) -> None:
        self.queue_size = queue_size
        self.stats = BrokerStats()
        self._ops: dict[OpKey, weakref.WeakSet[Subscription]] = {}
        self._lineages: dict[bytes, weakref.WeakSet[Subscription]] = {}
        self._cons: dict[ConKey, weakref.WeakSet[Subscription]] = {}
        self._spaces: dict[SpaceKey, weakref.WeakSet[Subscription]] = {}
        self._unplaced: weakref.WeakSet[Subscription] = weakref.WeakSet()   # space not known yet
        self._all: weakref.WeakSet[Subscription] = weakref.WeakSet()

    def listening(self) -> bool:
        """Whether any subscription is open (else nothing applied concerns anyone here)."""
        return bool(self._all)

    # ---- readers ---------------------------------------------------------------------------------
    def operation(self, op: str) -> Subscription:
        """A subscription to what concerns operation `op` (an ID that does not parse: to resyncs only;
        its first read refuses it anyway)."""
        try:
            rid = parse_id(op, IdKind.OPERATION)
            key: OpKey | None = (rid.lineage, operation_sequence(rid.ident))
        except IdError:
            key = None
        return self._add(Subscription(self, op, key, None, self.queue_size))

    def conversation(self, con: str) -> Subscription:
        try:
            rid = parse_id(con, IdKind.CONVERSATION)
            key: ConKey | None = rid.lineage + rid.ident
        except IdError:
            key = None
        return self._add(Subscription(self, con, None, key, self.queue_size))

    def subscriptions(self) -> list[Subscription]:
        """The open subscriptions (test hook)."""
        return list(self._all)

    # ---- what changed ----------------------------------------------------------------------------
    def deliver(self, targets: Targets) -> None:
        if targets.everyone:
            self.resync_all()
            return
        for key in targets.ops:
            for sub in self._subs(self._ops, key):
                sub.wake()
        for key, events in targets.deltas.items():
            if key in targets.ops:
                continue   # woken already: the read covers these
            for sub in self._subs(self._ops, key):
                for event in events:
                    sub.push(event)
        for key in targets.conversations:
            for sub in self._subs(self._cons, key):
                sub.wake()
        for lineage, floor in targets.floors.items():
            for sub in self._subs(self._lineages, lineage):
                if sub.op is not None and sub.op[1] < floor:
                    sub.wake()
        if targets.spaces and self._all:
            self._rights_changed(targets.spaces, targets.where)

    def _rights_changed(self, spaces: set[SpaceKey], where: Where | None) -> None:
        """Wake the subscriptions of everything in `spaces`."""
        if where is None:   # nobody to ask where a subscription lies: every reader reads again
            self.resync_all()
            return
        for sub in list(self._unplaced):
            space = where(sub.op, sub.con) if (sub.op is not None or sub.con is not None) else None
            if space is not None:
                self._unplaced.discard(sub)
                sub.space = space
                self._spaces.setdefault(space, weakref.WeakSet()).add(sub)
            # else its operation or conversation is not in the state (not yet, or retired): no rights in a
            # space govern it now (its reads refuse it); it is asked again at the next change
        for space in spaces:
            for sub in self._subs(self._spaces, space):
                sub.wake()

    def resync_all(self) -> None:
        """Every reader reads again (a runtime boot, grants or principals reloaded, announcements lost)."""
        self.stats.everyone += 1
        for sub in list(self._all):
            sub.wake()

    # ---- the index -------------------------------------------------------------------------------
    def _add(self, sub: Subscription) -> Subscription:
        self.stats.subscribed += 1
        self._all.add(sub)
        self._unplaced.add(sub)
        if sub.op is not None:
            self._ops.setdefault(sub.op, weakref.WeakSet()).add(sub)
            self._lineages.setdefault(sub.op[0], weakref.WeakSet()).add(sub)
        if sub.con is not None:
            self._cons.setdefault(sub.con, weakref.WeakSet()).add(sub)
        return sub

    @staticmethod
    def _subs(index: dict, key: object) -> Iterable[Subscription]:
        subs = index.get(key)
        if subs is None:
            return ()
        if not subs:   # their holders dropped them
            del index[key]
            return ()
        return list(subs)

    def _forget(self, sub: Subscription) -> None:
        self._all.discard(sub)
        self._unplaced.discard(sub)
        for index, key in ((self._ops, sub.op), (self._lineages, sub.op and sub.op[0]), (self._cons, sub.con),
                           (self._spaces, sub.space)):
            if key is None:
                continue
            subs = index.get(key)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del index[key]
