"""Lease mode: wires aotx.runtime.ownership into a SharedRuntime (docs/SCALE.md §2–3).

After boot: the lease bucket of the runtime's journal (`<stream>_OWNERS`) on a connection of its own
(the journal connection is dropped and opened anew after a write without an ack; a bucket bound to it
would fail every renewal from then on, and the runtime would lose every lease for good); the
writer appends only lineages the runtime holds; a command (or a stored write) for a lineage it does
not hold first acquires that lineage's lease, and is refused 503 `not_owner` naming the holder when
a live runtime holds it. Taking a lineage over: the log is read to its end (under the writer's
lock, so the next decision sees every message of the previous holder), then every input of that
lineage the state shows admitted and unfinished is journalled `interrupted` (never run again), as a
boot does for a runtime alone. Losing one (a renewal refused): this runtime's running inputs of
that lineage are cancelled; their last writes are refused by the writer (not_owner), and the new
holder journals them interrupted. A lease store that does not answer (an election, a lost connection)
makes a command needing a lease answer 503 `lease_unavailable` (retry later), never 500.
"""

from __future__ import annotations

import asyncio
import logging

import nats.errors
import nats.js.errors

from eventlog import LeaseBucket, OutageLog, close_connection, connect

from ..log_setup import set_up
from ..state import lineage_for
from . import boot
from .outcome import Outcome
from .round_stats import STATS, clock
from .ownership import LeasePolicy, Ownership, lease_bucket_name

log = logging.getLogger("aotx.runtime.ownership")
TAKEN_OVER = ("the runtime running this input stopped before it finished (its lease expired and another runtime "
              "took its lineage over); it is not executed again")


PING_INTERVAL = 1.0   # seconds: the lease connection's pings (nats-py's default is 2 minutes)


async def _lease_connection(runtime):
    """The leases' own connection (reconnecting forever), or the given recorder's where no URL was given.
    It pings every second, so a node that stops answering (SIGSTOP, a partition) is left for another
    within ~3 s and the renewals reach the bucket again (docs/SCALE.md, "Leases across a JetStream
    election"); with nats-py's default the connection stayed on the stopped node for minutes."""
    conn = runtime.writer.connection
    if conn.nats_url is None:
        return runtime.recorder.nc, None
    name = f"aotx-leases-{runtime.boot_id[:8]}"
    outage = OutageLog(log, name, conn.nats_url)
    nc = await connect(conn.nats_url, conn.auth, name=name, error_cb=outage.error, reconnected_cb=outage.reconnected,
                       max_reconnect_attempts=-1, reconnect_time_wait=0.2, ping_interval=PING_INTERVAL,
                       max_outstanding_pings=2)
    return nc, nc


async def attach_leases(runtime, policy: LeasePolicy) -> Ownership:
    nc, owned = await _lease_connection(runtime)
    try:
        name = lease_bucket_name(runtime.spec.name)   # asked again when another boot creates it now (log_setup)
        bucket = await set_up(f"the lease bucket {name}", lambda: LeaseBucket.connect(
            nc, name, policy.ttl, timeout=runtime.writer.connection.timeout))
    except BaseException:
        await close_connection(owned, name="aotx-leases")
        raise
    own = Ownership(bucket, runtime.boot_id, policy)
    own.connection = nc
    if owned is not None:
        own.on_stopped = lambda: close_connection(owned, name="aotx-leases")
    runtime.writer.may_write = own.may_write

    async def took_over(lineage: bytes) -> None:
        async with runtime.writer.lock:
            await runtime.writer.read_back()
        unfinished = [(lin, seq) for lin, seq in boot.unfinished_inputs(runtime.state) if lin == lineage]
        if unfinished:
            log.warning("took over lineage %s: %d unfinished inputs end interrupted", lineage.hex(), len(unfinished))
            await boot.interrupt_inputs(unfinished, runtime.executions, TAKEN_OVER)

    def lost(lineage: bytes) -> None:
        if runtime.executor is not None:
            runtime.executor.abandon(lineage)

    own.on_acquired, own.on_lost = took_over, lost
    own.orphans = lambda: {lin for lin, _ in boot.unfinished_inputs(runtime.state)}
    own.start()
    return own


async def lineage_refusal(runtime, principal: str) -> Outcome | None:
    """None when the runtime may write the principal's lineage now (acquired where needed); else
    503 not_owner naming the holder's boot (`holder`: where a gateway sends the command instead)."""
    own = runtime.ownership
    try:
        if own is not None and STATS.on:
            held, t0 = len(own.held), clock()
            refused = await own.ensure(lineage_for(principal))
            STATS.add("lease_ensure_s", clock() - t0)
            STATS.add("lease_acquired", len(own.held) > held)
        else:
            refused = None if own is None else await own.ensure(lineage_for(principal))
    except (nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError) as exc:
        log.info("lease of %s not acquired: %s: %s", principal, type(exc).__name__, exc)
        return Outcome.error(503, "lease_unavailable", f"the lease store did not answer ({type(exc).__name__}); "
                                                       "nothing was changed, retry later")
    if refused is None:
        return None
    return Outcome(503, {"error": {"type": "not_owner", "message": refused.message, "holder": refused.holder}})
