"""Two rules of the journal writer's round (aotx.runtime.writer) that matter once other runtimes
write the same journal (docs/SCALE.md): what a round applies, in which order, and which lineages it
may append at all."""

from __future__ import annotations

from .outcome import Outcome


async def feed_landed(writer, flights: list, landed: list, mutations) -> bool:
    """Apply the round's acknowledged ticks (`landed`: (seq, subject, tick), sorted) in stream
    order. Where another writer's messages lie between them, those are read back and applied first;
    one already applied (by a read-back or the follower) is skipped. If the log does not answer
    that read-back, the round's ticks from there on are left to the next read-back (the hold).
    False when applying failed (the runtime stopped)."""
    for seq, subject, tick in landed:
        applied = writer.applied_seq()
        if seq <= applied:
            continue
        if seq > applied + 1 and not await writer.read_back(upto=seq - 1):
            if writer.failed:
                return False
            for f in flights:
                writer._defer(f, writer.applied_seq())
            return True
        if not writer._feed(subject, seq, tick.data, mutations, tick.transfers):
            return False
    return True


def held_flights(writer, flights: list) -> list:
    """The flights this runtime may append (lease mode: lineages it holds); the others answer 503
    not_owner and append nothing. Without leases (`writer.may_write` None): all of them."""
    if writer.may_write is None:
        return flights
    for f in flights:
        if not f.continuation and not writer.may_write(f.lineage):
            f.error = Outcome.error(503, "not_owner", "this runtime does not hold the lease of this lineage "
                                    "(any more); nothing was changed, retry (the gateway finds its owner)")
    return [f for f in flights if f.error is None]
