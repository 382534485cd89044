"""A round's flights as atomic batches: every lineage of a round in one append, one ack, one fsync.

JetStream atomic batch publish (eventlog `append_batch`, ADR-50) stores a batch whole or not at
all. The writer (aotx.runtime.writer) hands its flights here when the log takes batches and the
round holds at least BATCH_MIN_MESSAGES ticks: nats-server 2.15 stages each atomic batch of an R1
file-storage stream in a temporary file store of its own (a directory and block file created,
flushed and removed: server/jetstream_batching.go newBatchStore), which costs 3.5–20 ms a batch on
this sandbox's disk whatever its size, against 0.2–1.5 ms a message for parallel single appends
(docs/PERFORMANCE.md); the two meet around 16 messages. Smaller rounds go message by message
(lineages in parallel), as before. They are
packed in order into batches of at most the log's `batch_limit` messages and MAX_BATCH_BYTES; a
flight stays within one batch unless it alone is larger (then its ticks continue, in order, in the
next batch, guarded by the sequence its last acknowledged tick got). Batches go out one after the
other. Each flight's first message in a batch carries its guard — the subject's last sequence as
the projector knows it (or as the flight's previous batch left it) — and its later messages none:
nats-server checks a subject's guard once per batch, and they land with it or not at all. Every
message keeps its own Nats-Msg-Id.

Failure mapping. A wrong guard refuses the whole batch and the log does not say whose: when it is
the write's first batch, the log is read back after the last message applied (what another writer
appended is applied now, in stream order, before anything of ours lands after it); the lineages that moved
answer 409 (their state read back) and the batch goes out again without them. Any other batch
refused whole for what one of its flights is — the byte cap (a smaller flight may still fit), a
message over the size limit, a conflict no read-back explains — is sent again flight by flight,
each flight alone an atomic batch, in parallel: each flight then gets exactly the answer it would
get alone (the writer's `refuse`: 409 after a read-back of that subject, 429 with the hold, 413),
and the others land. A
batch whose answer is lost (timeout, connection, server error) may or may not have landed: every
flight in it is unsynced whole and the read-back decides, as for a single append; the batches
after it are not sent (their flights answer 429 with the hold, nothing of them written). A message
id answered as already stored stops the runtime (ids are fresh per attempt). A stream that stops
taking batches (AtomicBatchUnsupported: another writer updated it without allow_atomic) sends
what is left message by message (returned to the writer).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventlog import (AtomicBatchUnsupported, BatchMessage, BatchTooLarge, ConcurrencyConflict, DuplicateInBatch,
                      JournalFull, JournalUnavailable, MessageTooLarge)

from ..journal import Tick
from .write_order import SPURIOUS_RETRIES, spurious_conflict

if TYPE_CHECKING:
    from .writer import Flight, JournalWriter

MAX_BATCH_BYTES = 4 << 20     # ours, not the server's: what one batch asks nats-server to stage
BATCH_MIN_MESSAGES = 16       # a round with fewer ticks appends them one by one (see above)
_WHOLE = (ConcurrencyConflict, JournalFull, MessageTooLarge, BatchTooLarge)   # refused whole, nothing stored


@dataclass(eq=False)
class Part:
    """A flight's ticks in one batch."""

    flight: "Flight"
    ticks: list[Tick]


def pack(flights: list["Flight"], limit: int, max_bytes: int = MAX_BATCH_BYTES) -> list[list[Part]]:
    """The flights' remaining ticks in batches of ≤ `limit` messages and ≤ `max_bytes` (a single tick
    over `max_bytes` goes alone); flights in order, a flight split only where it alone is too large."""
    batches: list[list[Part]] = []
    current: list[Part] = []
    count = size = 0
    for f in flights:
        ticks = f.rest
        need, weight = len(ticks), sum(len(t.data) for t in ticks)
        if current and (count + need > limit or size + weight > max_bytes):
            batches.append(current)
            current, count, size = [], 0, 0
        for tick in ticks:
            if count and (count + 1 > limit or size + len(tick.data) > max_bytes):
                batches.append(current)
                current, count, size = [], 0, 0
            if current and current[-1].flight is f:
                current[-1].ticks.append(tick)
            else:
                current.append(Part(f, [tick]))
            count, size = count + 1, size + len(tick.data)
    if current:
        batches.append(current)
    return batches


async def append_batched(writer: "JournalWriter", recorder: Any, flights: list["Flight"]) -> list["Flight"]:
    """Append the flights as atomic batches (acked ticks go to each flight's `landed`, refusals to its
    `error`); returns the flights left to append one message at a time (the stream stopped taking
    batches), else []."""
    batches = pack(flights, int(recorder.batch_limit))
    for i, parts in enumerate(batches):
        parts = [p for p in parts if p.flight.error is None]   # a flight refused earlier sends no more
        if not parts:
            continue
        first = not any(f.landed or f.continuation for f in flights)   # nothing of this write acked yet
        outcome = await _send(writer, recorder, parts, first)
        if outcome == "fallback":
            return [f for f in flights if f.error is None and f.rest]
        if outcome == "stop":   # landing unknown or the runtime stopped: nothing more is sent
            for later in batches[i + 1:]:
                for p in later:
                    if p.flight.error is None:
                        p.flight.error = writer.failed_outcome() if writer.failed else writer.held()
            break
    return []


async def _send(writer: "JournalWriter", recorder: Any, parts: list[Part], first: bool = False,
                retries: int = 0) -> str:
    """One batch: "ok" (answered, landed or refused), "stop" (landing unknown, or the runtime
    stopped) or "fallback" (the stream does not take batches: nothing sent). `first`: nothing of
    the write landed before it (a conflict may then be read back before the batch goes again)."""
    messages = []
    for p in parts:
        expected = writer.expected(p.flight)
        for j, tick in enumerate(p.ticks):
            messages.append(BatchMessage(p.flight.subject, tick.data, writer.msg_id(tick), expected if j == 0 else None))
    try:
        with writer.metrics.timed("batch", len(messages)):
            acks = await recorder.append_batch(messages)
    except _WHOLE as exc:
        if len(parts) == 1:
            f = parts[0].flight
            if isinstance(exc, ConcurrencyConflict) and retries < SPURIOUS_RETRIES and \
                    await spurious_conflict(recorder, f.subject, writer.expected(f)):
                return await _send(writer, recorder, parts, first, retries + 1)   # (write_order says why)
            writer.refuse(f, exc)
            return "ok"
        if first and isinstance(exc, ConcurrencyConflict):
            return await _without_the_moved(writer, recorder, parts, exc)
        # one flight's refusal refused them all: each flight alone, so it lands on the one it belongs to
        alone = await asyncio.gather(*(_send(writer, recorder, [p]) for p in parts))
        return "stop" if "stop" in alone else "fallback" if "fallback" in alone else "ok"
    except AtomicBatchUnsupported:
        return "fallback"
    except DuplicateInBatch as exc:
        if retries:   # the batch sent again after a refusal the log seemed to contradict: the first send
            # landed (write_order.append_guarded says how), where the refusal does not say: read back
            for p in parts:
                writer.refuse(p.flight, JournalUnavailable(f"a repeated batch was answered as already stored ({exc}): "
                                                           "its first send landed"))
            return "stop"
        writer.failed = f"journal refused a batch of fresh message ids as already stored: {exc}"
        for p in parts:
            p.flight.error = writer.failed_outcome()
        return "stop"
    except Exception as exc:  # JournalUnavailable or unexpected: the batch may or may not have landed
        for p in parts:
            writer.refuse(p.flight, exc)
        return "stop"
    it = iter(acks)
    for p in parts:
        for tick in p.ticks:
            p.flight.landed.append((next(it).seq, tick))
            writer.early.acked(writer, p.flight, p.flight.landed[-1][0], tick)
    return "ok"


async def _without_the_moved(writer: "JournalWriter", recorder: Any, parts: list[Part],
                             exc: ConcurrencyConflict) -> str:
    """A wrong guard in a first batch: read the log back (applied now, in stream order); the
    flights whose subject moved are refused 409, the others go out again as one batch. Where no
    read-back explains it (or one fails), flight by flight."""
    assert writer.projector is not None
    last = writer.projector.last_subject_seq
    before = {p.flight.subject: last.get(p.flight.subject, 0) for p in parts}
    moved, still = [], []
    if await writer.read_back():   # the log after the last message applied, every subject in stream order
        for p in parts:
            (moved if last.get(p.flight.subject, 0) != before[p.flight.subject] else still).append(p)
    elif writer.failed:
        for q in parts:
            q.flight.error = writer.failed_outcome()
        return "stop"
    if not moved:
        alone = await asyncio.gather(*(_send(writer, recorder, [p]) for p in parts))
        return "stop" if "stop" in alone else "fallback" if "fallback" in alone else "ok"
    for p in moved:
        writer.refuse(p.flight, exc)
    return await _send(writer, recorder, still, True) if still else "ok"
