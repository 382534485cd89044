"""Lease mode: wires aotx.runtime.ownership into a SharedRuntime (docs/SCALE.md §2–3).

After boot: the lease bucket of the runtime's journal (`<stream>_OWNERS`) on its connection; the
writer appends only lineages the runtime holds; a command (or a stored write) for a lineage it does
not hold first acquires that lineage's lease, and is refused 503 `not_owner` naming the holder when
a live runtime holds it. Taking a lineage over: the log is read to its end (under the writer's
lock, so the next decision sees every message of the previous holder), then every input of that
lineage the state shows admitted and unfinished is journalled `interrupted` (never run again), as a
boot does for a runtime alone. Losing one (a renewal refused): this runtime's running inputs of
that lineage are cancelled; their last writes are refused by the writer (not_owner), and the new
holder journals them interrupted.
"""

from __future__ import annotations

import logging

from eventlog import LeaseBucket

from ..state import lineage_for
from . import boot
from .outcome import Outcome
from .ownership import LeasePolicy, Ownership, lease_bucket_name

log = logging.getLogger("aotx.runtime.ownership")
TAKEN_OVER = ("the runtime running this input stopped before it finished (its lease expired and another runtime "
              "took its lineage over); it is not executed again")


async def attach_leases(runtime, policy: LeasePolicy) -> Ownership:
    recorder = runtime.recorder
    bucket = await LeaseBucket.connect(recorder.nc, lease_bucket_name(runtime.spec.name), policy.ttl)
    own = Ownership(bucket, runtime.boot_id, policy)
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
    refused = None if own is None else await own.ensure(lineage_for(principal))
    if refused is None:
        return None
    return Outcome(503, {"error": {"type": "not_owner", "message": refused.message, "holder": refused.holder}})
