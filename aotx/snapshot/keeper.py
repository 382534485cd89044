"""SnapshotKeeper: what the runtime asks of snapshots — boot from one, write one every so often.

* `boot(info, fresh)` (before the tail replay): the newest valid snapshot's Projector and the
  sequence to read from, else `fresh` and 1 (full replay). A bucket that cannot be reached is one
  warning line, a full replay and no snapshots this run: it never stops a boot.
* `booted(projector)` (after the replay): one info line — "booted from snapshot at seq N + M tail
  messages" or "booted by full replay of M messages" — and a first snapshot when the replay was long.
* `applied(message)`: the runtime's observer of applied messages (aotx.runtime.observers: called
  after each journal message the projector applied live, never during boot) = `fed(the projector
  booted, message.seq)`.
* `fed(projector, seq)` (after each live journal message the projector applied): when due (every
  `policy.every` messages, or `policy.interval` seconds while messages arrive), encode a snapshot
  synchronously — the projector changes only under the writer's lock on this event loop, so this is
  a consistent point — and upload it in the background; the writer never waits for an upload. One
  upload at a time: a snapshot that came due while one was under way is taken when that upload ends
  (between messages on this event loop: the same consistent point), not left for a next message.

A snapshot covers a prefix of the stream: the keeper checks that the projection applied every stream
message up to its covered sequence, in stream order (sequence = base + messages applied, where base
is the sequences before the projection's first message). A message applied out of order (the writer
applies in stream order, also after a lost ack: a safety net) or a gap pauses snapshots until the next
boot, which checks again.
No snapshot is taken while a transfer is open (formats 1 and 2 hold none).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import nats.errors

from eventlog import EventLogError, NatsAuth, StreamSpec, StreamStatus

from ..log_setup import set_up
from ..projection import Projector
from ..state import Capacities
from .body import SnapshotUnready
from .boot import load_newest
from .codec import covered_seq, encode_snapshot
from .store import SnapshotStore

log = logging.getLogger("aotx.snapshot")
DEFAULT_EVERY = 2_000
CLOSE_WAIT = 5.0       # seconds stop() waits for an upload under way
_TRANSPORT = (nats.errors.Error, EventLogError, OSError, asyncio.TimeoutError)


@dataclass(frozen=True)
class SnapshotPolicy:
    every: int = DEFAULT_EVERY   # applied journal messages between snapshots (0: not by count)
    interval: float = 0.0        # seconds between snapshots while messages arrive (0: not by time)
    keep: int = 2                # newest snapshots kept

    def __post_init__(self) -> None:
        if type(self.every) is not int or self.every < 0 or not self.interval >= 0 or self.keep < 1:
            raise ValueError(f"snapshot policy: every ≥ 0 messages, interval ≥ 0 s, keep ≥ 1; got {self}")
        if not self.every and not self.interval:
            raise ValueError("snapshot policy: give every (messages) or interval (seconds)")


@dataclass
class SnapshotStats:
    """The last snapshot this keeper wrote, and where the last boot started."""

    booted_from: int | None = None     # covered sequence of the snapshot boot started from (None: full replay)
    tail: int = 0                      # messages replayed after it at boot
    saved: int = 0                     # snapshots written this run
    covered: int | None = None         # of the last one written
    bytes: int = 0
    encode_s: float = 0.0
    upload_s: float = 0.0


class SnapshotKeeper:
    def __init__(self, url: str, auth: NatsAuth | None, spec: StreamSpec, capacities: Capacities,
                 policy: SnapshotPolicy, *, timeout: float = 10.0) -> None:
        self.url, self.auth, self.spec, self.capacities, self.policy = url, auth, spec, capacities, policy
        self.timeout = timeout
        self.store: SnapshotStore | None = None
        self.stats = SnapshotStats()
        self._base = 0
        self._in_order = False
        self._last_messages = 0
        self._last_time = time.monotonic()
        self._upload: asyncio.Task | None = None
        self._projector: Projector | None = None   # the one booted(): the runtime's, advanced live
        self._closing = False

    async def boot(self, info: StreamStatus, fresh: Projector) -> tuple[Projector, int]:
        self._base = max(info.first_seq, 1) - 1
        try:
            self.store = await set_up(   # asked again when another boot creates the bucket now (log_setup)
                f"the snapshot bucket of {self.spec.name}",
                lambda: SnapshotStore.connect(self.url, self.spec.name, auth=self.auth, timeout=self.timeout,
                                              replicas=self.spec.replicas))
            loaded = await load_newest(self.store, info, self.capacities)
        except _TRANSPORT as exc:
            log.warning("snapshots of %s unavailable (%s: %s): full replay, and no snapshots this run",
                        self.spec.name, type(exc).__name__, exc)
            await self._close_store()
            return fresh, 1
        if loaded is None:
            return fresh, 1
        projector, start = loaded
        self._base = start - 1 - projector.messages
        self.stats.booted_from = start - 1
        self._last_messages = projector.messages
        return projector, start

    def booted(self, p: Projector) -> None:
        self._projector = p
        start = self.stats.booted_from
        self.stats.tail = p.messages - self._last_messages
        if start is None:
            log.info("booted by full replay of %d journal messages", p.messages)
        else:
            log.info("booted from snapshot at seq %d + %d tail messages", start, self.stats.tail)
        self._in_order = self.store is not None and (p.messages == 0 or covered_seq(p) == self._base + p.messages)
        if self.store is not None and not self._in_order:
            log.info("snapshots paused until the next boot: the stream has gaps (%d messages applied up to sequence "
                     "%d after sequence %d)", p.messages, covered_seq(p), self._base)
        self._last_time = time.monotonic()
        self._maybe(p)

    def applied(self, message: Any) -> None:
        """An observer of applied messages (aotx.runtime.observers.Applied: only its `seq` is read). It
        is told after the projector applied that message and before anything else is applied (the
        writer feeds and notifies synchronously on this event loop), so the projector is at the
        consistent point `fed` encodes."""
        if self._projector is not None:
            self.fed(self._projector, message.seq)

    def fed(self, p: Projector, seq: int) -> None:
        if not self._in_order:
            return
        if seq != self._base + p.messages:
            self._in_order = False
            log.info("snapshots paused until the next boot: journal message %d was applied out of stream order", seq)
            return
        self._maybe(p)

    def _maybe(self, p: Projector) -> None:
        if not self._in_order or (self._upload is not None and not self._upload.done()):
            return
        new = p.messages - self._last_messages
        every, interval = self.policy.every, self.policy.interval
        if not ((every and new >= every) or (interval and new > 0 and time.monotonic() - self._last_time >= interval)):
            return
        started = time.perf_counter()
        try:
            blob = encode_snapshot(p)
        except SnapshotUnready:
            return   # a transfer is open: the next message completes it
        self.stats.encode_s = time.perf_counter() - started
        self._last_messages, self._last_time = p.messages, time.monotonic()
        self._upload = asyncio.get_running_loop().create_task(
            self._save(blob, p.source, p.incarnation, covered_seq(p)))

    async def _save(self, blob: bytes, stream: str, incarnation: str, covered: int) -> None:
        assert self.store is not None
        started = time.perf_counter()
        try:
            name, removed = await self.store.save(blob, stream, incarnation, covered, keep=self.policy.keep)
        except _TRANSPORT as exc:
            log.warning("snapshot at seq %d (%d bytes) not saved: %s: %s; the next one is due after %d more messages",
                        covered, len(blob), type(exc).__name__, exc, self.policy.every)
            return
        except Exception:  # a background task: any other fault is logged here, with its traceback
            log.exception("snapshot at seq %d (%d bytes) not saved", covered, len(blob))
            return
        s = self.stats
        s.saved, s.covered, s.bytes, s.upload_s = s.saved + 1, covered, len(blob), time.perf_counter() - started
        log.info("snapshot %s saved: seq %d, %d bytes, encoded in %.1f ms, uploaded in %.1f ms; removed %s",
                 name, covered, len(blob), s.encode_s * 1e3, s.upload_s * 1e3, removed or "none")
        if self._projector is not None and not self._closing:
            self._upload = None
            self._maybe(self._projector)   # what came due during this upload

    async def settled(self) -> None:
        """Wait for the upload under way, if any, and for the one it started when it ended (tests and benchmarks)."""
        while self._upload is not None and not self._upload.done():
            await asyncio.gather(self._upload, return_exceptions=True)

    async def close(self) -> None:
        """Wait a bounded time for an upload under way (else abandon it: an unfinished put is never read),
        then close the bucket's connection."""
        self._closing = True   # (an upload that ends now starts no other)
        task, self._upload = self._upload, None
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=CLOSE_WAIT)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                log.warning("a snapshot upload did not finish within %.0f s of stop; abandoned", CLOSE_WAIT)
        await self._close_store()

    async def _close_store(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            await store.close()
