"""Three rules of the journal writer's round (aotx.runtime.writer) that matter once other runtimes
write the same journal (docs/SCALE.md): what a round applies, in which order, and which lineages it
may append at all, and when a guard's refusal is not another writer's."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from time import perf_counter
from typing import Optional

import nats.errors

from eventlog import ConcurrencyConflict, EventLogError

from .catch_up import apply_to
from .outcome import Outcome
from .round_stats import STATS, clock

log = logging.getLogger("aotx.runtime")
SPURIOUS_RETRIES = 3


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
        if seq > applied + 1:   # another writer's messages lie before it: read them back first
            t0 = clock() if STATS.on else 0.0
            ok = await apply_to(writer, seq - 1)
            if STATS.on:
                STATS.add("landed_read_s", clock() - t0)
                STATS.add("landed_reads")
                STATS.add("landed_read_msgs", writer.applied_seq() - applied)
            if not ok:
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


async def append_sent(writer, recorder, flights: list) -> list:
    """Flights of one tick each, on a recorder that `sends_appends`: every tick sent, in order, then every
    answer awaited, in order (no task per flight, as asyncio.gather would make; the log acks them in the
    order sent). Per flight, what `writer._append` returned or raised."""
    sent: list = []
    try:
        for f in flights:
            tick = f.ticks[len(f.landed)]
            expected, began, msg_id = writer.expected(f), perf_counter(), writer.msg_id(tick)
            try:
                first = await recorder.send_append(f.subject, tick.data, msg_id, expected)
            except Exception as exc:   # answered as that append's own failure (append_guarded)
                first = exc
            sent.append((f, (first, expected, began, msg_id)))
        results: list = []
        for f, first in sent:
            try:
                results.append(await writer._append(recorder, f, first))
            except Exception as exc:
                results.append(exc)
        return results
    except BaseException:   # cancelled: what was sent and not awaited yet is given up
        for _, (first, *_) in sent:
            if isinstance(first, asyncio.Future):
                first.cancel()
        raise


async def append_guarded(writer, recorder, f, tick, msg_id: str, sent: Optional[tuple] = None):
    """One tick of flight `f`, guarded by the expected last subject sequence. A refusal that the
    log itself contradicts — the subject's last message is the very one expected, so no other
    writer appended — is tried again (a few times, briefly spaced): a clustered stream's leader
    refuses a guarded publish while it still applies the subject's previous message (seen on
    nats-server 2.15.1: one in ~5,000 single-writer appends with 8 writers on a 3-node cluster).
    Sent again, it may be answered as a duplicate of `msg_id` (fresh per write attempt: no other write
    carries it): the first send did land, at the sequence the duplicate names, and its refusal came from a
    node that had not applied it (a former leader, just resumed, answering beside the new one: seen in the
    cluster drill). That is this write's own landing, and answered as one. `sent`: the first attempt
    was sent already (`recorder.send_append`: (what it returned or raised, its guard, when it was sent,
    its message id: `msg_id`)), and only its answer is awaited here."""
    attempt = 0
    while True:
        if sent is not None and attempt == 0:
            first, expected, began, _ = sent
        else:
            first, expected, began = None, writer.expected(f), perf_counter()
        try:
            try:   # (writer.metrics.timed, without a context manager's generator on the hot path)
                if first is None:
                    ack = await recorder.append(f.subject, tick.data, msg_id=msg_id,
                                                expected_last_subject_seq=expected)
                elif isinstance(first, BaseException):   # the send itself raised
                    raise first
                else:
                    ack = await recorder.append_sent(first, f.subject, expected)
            except Exception:
                writer.metrics.failed("single")
                raise
            writer.metrics.acked("single", 1, began)
            if ack.duplicate and attempt:
                log.info("journal answered the repeat of %s on %s as a duplicate: it landed at %d", msg_id,
                         f.subject, ack.seq)
                return dataclasses.replace(ack, duplicate=False)
            return ack
        except ConcurrencyConflict:
            attempt += 1
            if attempt > SPURIOUS_RETRIES or not await spurious_conflict(recorder, f.subject, expected):
                raise
            log.info("journal refused a guarded append on %s that no other writer explains; again", f.subject)
            await asyncio.sleep(0.002 * attempt)


async def spurious_conflict(recorder, subject: str, expected: int) -> bool:
    """Does the log contradict a guard's refusal: is the subject's last message the one expected?"""
    last = getattr(recorder, "last_subject_seq", None)
    if last is None:
        return False
    try:
        return await last(subject) == expected
    except (EventLogError, nats.errors.Error, OSError) as exc:   # cannot tell: a real conflict, as refused
        log.info("could not read the last message of %s (%s): the conflict stands", subject, type(exc).__name__)
        return False
