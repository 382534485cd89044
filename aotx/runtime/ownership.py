"""Which lineages this runtime writes, by leases in a JetStream KV bucket (docs/SCALE.md §2–3).

A runtime in lease mode writes a lineage only while it holds that lineage's lease (the writer asks
`may_write` before every append). `ensure(lineage)` acquires a free lease (a lineage nobody holds,
or whose holder stopped renewing `ttl` seconds ago) and then runs the takeover (`on_acquired`: read
the log to its end, journal the previous holder's unfinished inputs `interrupted`); a lineage held
by a live runtime answers that holder. The holder treats a lease as gone `margin` (a fraction of the
TTL) before the server would expire it, counted from the moment the last successful renewal was
*sent* (its own monotonic clock, which keeps counting through a SIGSTOP): by the time a successor can
acquire it, this runtime has stopped appending.

Renewing across an election (docs/SCALE.md, "Leases across a JetStream election"). While the lease
bucket's stream elects a leader (its leader died, was stopped, stepped down) a renewal gets no answer:
nats-server drops it, even in an election of a few milliseconds. Held leases are renewed every
`renew_every` seconds, all at once; an attempt that gets no answer within `retry` seconds is abandoned
and sent again, until one lands or the lease has expired on the server. So a lease rides out an outage
of its bucket of up to `rides_out` = ttl·(1 − margin) − renew_every − retry seconds, wherever in the
renewal cycle the outage begins. `LeasePolicy(election=E)` asks for E: the renewal cadence is chosen so
that `rides_out` ≥ E, and a TTL too short for it is refused. Each lease holder keeps writing through
such an election (renewals land as soon as the bucket answers again); a longer one costs the lease,
and the log's guard still keeps one writer.

A renewal that is refused (the lease was lost) drops the lineage at once (`on_lost`), unless the
lease still names this boot at a revision it never heard of (a renewal whose answer was lost, applied
all the same, e.g. one abandoned above): that one is taken up at its current revision (`_take_up`).
Whatever a late append might still carry is refused by the log's expected-last-subject-sequence guard,
since the successor's first write follows every message it read.

The orphan sweep (every ttl/2): a lineage with unfinished inputs in the state and no live lease
(its runtime died mid-input) is acquired, so its inputs end `interrupted` within about a TTL of the
death, whether or not a command for that lineage comes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Optional

import msgpack
import nats.errors
import nats.js.errors

from eventlog import LeaseBucket

from .stopping import cancel_and_wait

log = logging.getLogger("aotx.runtime.ownership")


@dataclass(frozen=True)
class NotOwner:
    """A lineage another live runtime writes: `holder` is its boot id (gateways route to it)."""

    holder: str
    message: str


DEFAULT_TTL = 15.0        # `--lease-ttl`
DEFAULT_ELECTION = 9.0    # `--lease-election`: nats-server's longest RAFT election timeout (4–9 s)
RETRY_MAX = 0.5           # seconds: the longest wait of one renewal attempt
NO_ANSWER = (asyncio.TimeoutError, nats.errors.Error, nats.js.errors.Error)   # the bucket did not answer


@dataclass(frozen=True)
class LeasePolicy:
    ttl: float = DEFAULT_TTL   # seconds a lease lives without renewal (the bucket's max age)
    margin: float = 0.2        # the holder stops writing this fraction of the TTL before it would expire
    election: float = 0.0      # seconds of an election (the bucket not answering) a held lease must ride out;
                               # 0: what renewing every ttl/3 gives (`rides_out`)

    def __post_init__(self) -> None:
        if not self.ttl > 0 or not 0 < self.margin < 1 or not self.election >= 0:
            raise ValueError(f"lease ttl must be > 0, margin in (0, 1) and election >= 0, got {self.ttl!r}, "
                             f"{self.margin!r}, {self.election!r}")
        if self.renew_every < self.retry:
            need = (self.election + 3 * RETRY_MAX) / (1 - self.margin)
            raise ValueError(f"a lease TTL of {self.ttl:g} s cannot ride out an election of {self.election:g} s "
                             f"(the holder stops writing {self.margin:.0%} of the TTL early and must renew before): "
                             f"use a TTL of at least {need:.3g} s, or a shorter election")

    @property
    def writable(self) -> float:
        """Seconds after a renewal was sent that the holder may write."""
        return self.ttl * (1 - self.margin)

    @property
    def retry(self) -> float:
        """Seconds one renewal attempt may wait for an answer (and between attempts) while the bucket
        does not answer; also how often the renewer looks for leases due."""
        return min(RETRY_MAX, self.ttl / 10)

    @property
    def renew_every(self) -> float:
        return min(self.ttl / 3, self.writable - self.election - 2 * self.retry)

    @property
    def rides_out(self) -> float:
        """The longest outage of the lease bucket (an election) a held lease survives, wherever it begins:
        its renewal starts at most one look (`retry`) after it is due, and the attempt under way when the
        bucket answers again may have been dropped (one more `retry`)."""
        return self.writable - self.renew_every - 2 * self.retry

    def describe(self) -> str:
        return (f"lease TTL {self.ttl:g} s, renewed every {self.renew_every:.3g} s, rides out an election of "
                f"{self.rides_out:.3g} s")


def lease_bucket_name(stream: str) -> str:
    return f"{stream}_OWNERS"


class Ownership:
    def __init__(self, bucket: LeaseBucket, boot_id: str, policy: LeasePolicy,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bucket, self.boot_id, self.policy, self.clock = bucket, boot_id, policy, clock
        self.held: dict[bytes, tuple[int, float]] = {}   # lineage → (revision, when its last renewal was sent)
        self.on_acquired: Optional[Callable[[bytes], Awaitable[None]]] = None
        self.on_lost: Optional[Callable[[bytes], None]] = None
        self.orphans: Callable[[], Iterable[bytes]] = lambda: ()
        self.connection = None   # the bucket's connection (lease_mode), closed by on_stopped
        self.on_stopped: Optional[Callable[[], Awaitable[None]]] = None
        self._pending: dict[bytes, asyncio.Future] = {}
        self._renewing: dict[bytes, asyncio.Task] = {}   # renewals under way (the renewer's)
        self._sweep: Optional[asyncio.Task] = None
        self._task: Optional[asyncio.Task] = None
        self.value = msgpack.packb({"boot": boot_id})

    # ---- what the writer asks ---------------------------------------------------------------
    def may_write(self, lineage: bytes) -> bool:
        h = self.held.get(lineage)
        return h is not None and self.clock() < h[1] + self.policy.writable

    # ---- acquiring -----------------------------------------------------------------------------
    async def ensure(self, lineage: bytes) -> Optional[NotOwner]:
        """None once this runtime holds `lineage` (acquired now, with its takeover, or held already);
        else the refusal: which boot holds it."""
        if self.may_write(lineage):
            return None
        pending = self._pending.get(lineage)
        if pending is None:
            pending = self._pending[lineage] = asyncio.ensure_future(self._acquire(lineage))
            pending.add_done_callback(lambda _: self._pending.pop(lineage, None))
        return await asyncio.shield(pending)

    async def _acquire(self, lineage: bytes) -> Optional[NotOwner]:
        key = lineage.hex()
        sent = self.clock()
        held = self.held.get(lineage)
        if held is not None:   # ours but near its end: renew it (it may already be someone else's)
            revision = await self.bucket.renew(key, self.value, held[0]) or await self._take_up(key)
            if revision is not None:
                self.held[lineage] = (revision, sent)
                return None
            self._lose(lineage)
        revision = await self.bucket.acquire(key, self.value) or await self._take_up(key)
        if revision is None:
            holder = await self.bucket.holder(key)
            boot = str(msgpack.unpackb(holder[0]).get("boot", "")) if holder else ""
            return NotOwner(boot, f"lineage {key} is written by another runtime (boot {boot or 'unknown'}); "
                                  "nothing was changed, retry there")
        self.held[lineage] = (revision, sent)
        if self.on_acquired is not None:
            await self.on_acquired(lineage)
        log.info("lease acquired", extra={"fields": {"lineage": key, "boot": self.boot_id}})
        return None

    async def _take_up(self, key: str) -> int | None:
        """A lease that names this boot at a revision it does not know (a renewal or acquisition whose
        answer was lost, applied all the same): renewed at its current revision. None when it is not ours."""
        holder = await self.bucket.holder(key)
        if holder is None or holder[0] != self.value:
            return None
        log.info("lease %s is this boot's at revision %d, unacknowledged: taken up", key, holder[1])
        return await self.bucket.renew(key, self.value, holder[1])

    def _lose(self, lineage: bytes) -> None:
        if self.held.pop(lineage, None) is not None:
            log.warning("lease lost", extra={"fields": {"lineage": lineage.hex(), "boot": self.boot_id}})
            if self.on_lost is not None:
                self.on_lost(lineage)

    # ---- renewing, sweeping, releasing ---------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="aotx lease renewal")

    async def _run(self) -> None:
        last_sweep = self.clock()
        while True:
            await asyncio.sleep(self.policy.retry)
            now = self.clock()
            for lineage, (_, sent) in list(self.held.items()):   # each lease on its own: one's wait delays no other
                if now >= sent + self.policy.renew_every and lineage not in self._renewing:
                    task = asyncio.get_running_loop().create_task(self._renew(lineage), name="aotx lease renewal")
                    self._renewing[lineage] = task
                    task.add_done_callback(lambda _, lin=lineage: self._renewing.pop(lin, None))
            if now - last_sweep >= self.policy.ttl / 2 and (self._sweep is None or self._sweep.done()):
                last_sweep = now   # on a task of its own: an acquisition waiting on the bucket delays no renewal
                self._sweep = asyncio.get_running_loop().create_task(self._sweep_orphans(), name="aotx orphan sweep")

    async def _sweep_orphans(self) -> None:
        for lineage in list(self.orphans()):
            if lineage not in self.held:
                await self._try(self.ensure(lineage), "orphan sweep")

    async def renew_all(self) -> None:
        """Renew every held lease now, all at once."""
        await asyncio.gather(*(self._renew(lineage) for lineage in list(self.held)))

    async def _renew(self, lineage: bytes) -> None:
        """One lease: attempts of at most `retry` seconds each, until one is answered or the lease has
        expired on the server (a refusal then: lost, or taken up where it is still this boot's)."""
        key = lineage.hex()
        while lineage in self.held:
            revision, last = self.held[lineage]
            sent = self.clock()
            try:
                new = await asyncio.wait_for(self._renewed(key, revision), self.policy.retry)
            except NO_ANSWER as exc:   # an election, a lost connection: keep the lease until its local end
                if self.clock() >= last + self.policy.ttl:
                    log.info("lease renewal of %s failed: %s: %s", key, type(exc).__name__, exc)
                    return
                log.debug("lease renewal of %s unanswered (%s); sent again", key, type(exc).__name__)
                await asyncio.sleep(max(0.0, sent + self.policy.retry - self.clock()))
                continue
            if new is None:
                self._lose(lineage)
            elif lineage in self.held:
                self.held[lineage] = (new, sent)
            return

    async def _renewed(self, key: str, revision: int) -> int | None:
        return await self.bucket.renew(key, self.value, revision) or await self._take_up(key)

    async def _try(self, coro, what: str) -> None:
        try:
            await coro
        except Exception as exc:  # logged; tried again at the next sweep
            log.info("%s failed: %s: %s", what, type(exc).__name__, exc)

    async def stop(self, release: bool = True) -> None:
        """Stop renewing; `release`: give every lease back (a successor need not wait for the TTL)."""
        task, self._task = self._task, None
        await cancel_and_wait([task, self._sweep, *self._renewing.values()], what="lease renewal")
        if release:
            for lineage, (revision, _) in list(self.held.items()):
                await self._try(self.bucket.release(lineage.hex(), revision), "lease release")
        self.held.clear()
        if self.on_stopped is not None:
            await self.on_stopped()
