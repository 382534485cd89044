"""One round of stored commands (aotx.stored): decide in order, encode, append, apply what landed, answer.

Every stored command queued while a round was in flight joins the next (the group commit, as
commands and execution writes do; rounds of every kind take turns under the writer's lock). Each is
decided (pure) against a fork of the acknowledged stored state that already holds the events
accepted before it in this round — so two requests with one Idempotency-Key in one round start it
once — and its events are applied to that fork only. Per identity lineage, the accepted commands'
events become one flight of ticks (≤ 16 records each: the generated events of many streams share an
append and its fsync); the writer appends them — a flight of CHAIN_MIN ticks or more as one atomic
batch even in a small round (one ack instead of a chain of acks, each of which waits for the event
loop and, while the engine thread holds the GIL, for a switch interval) — and applies what the log
acknowledged through the projector. A command is answered Saved once the tick completing its last event landed, else with
the writer's refusal (Reason.HOLD on a journal hold, nothing stored). A command that needed no
event but was decided on this round's pending events of its identity is answered after they landed,
or decided again in the next round.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from ..stored import (Accepted, Reason, Saved, StoredApplyError, StoredCommand, StoredLimits, StoredRefusal,
                      apply_stored_into, decide, identity_lineage)
from .group_commit import answer
from .outcome import Outcome
from .ticks import encode_ticks
from .writer import JournalWriter

log = logging.getLogger("aotx.runtime")
# a lineage's ticks as one atomic batch from this many on, in a round of any size (None: only from the
# writer's batch_min_messages on, as before; ops.bench.stored_rounds --no-chains). One batch costs about
# what 4-5 acked appends in a row cost on an idle loop; with the engine thread holding the GIL each acked
# append costs ~10 ms more (docs/PERFORMANCE.md, "stored rounds"). AOTX_STORED_CHAIN_MIN (a tick count, or
# "none") sets it for a process, for an A/B on the machine that matters (chain_min_from)
DEFAULT_CHAIN_MIN = 4
CHAIN_ENV = "AOTX_STORED_CHAIN_MIN"


def chain_min_from(raw: Optional[str]) -> Optional[int]:
    """CHAIN_MIN from the environment's text: a tick count ≥ 1, "none"/"off" (chains as before CHAIN_MIN);
    unset or empty: the default; anything else is logged and the default kept."""
    text = (raw or "").strip().lower()
    if not text:
        return DEFAULT_CHAIN_MIN
    if text in ("none", "off"):
        return None
    if text.isdigit() and int(text) >= 1:
        return int(text)
    log.warning("%s=%r is not a tick count >= 1 or 'none': stored rounds batch from %d ticks", CHAIN_ENV, raw,
                DEFAULT_CHAIN_MIN)
    return DEFAULT_CHAIN_MIN


CHAIN_MIN: int | None = chain_min_from(os.environ.get(CHAIN_ENV))


@dataclass(eq=False)
class StoredWrite:
    identity: str
    command: StoredCommand
    future: asyncio.Future
    decision: Optional[Accepted] = field(default=None, repr=False)


def refusal_of(outcome: Outcome) -> StoredRefusal:
    """The writer's answer for a write that did not land, as a stored refusal."""
    message = outcome.body.get("error", {}).get("message", "the journal did not take the write")
    reason = {429: Reason.HOLD, 413: Reason.TOO_LARGE}.get(outcome.status, Reason.UNAVAILABLE)
    return StoredRefusal(reason, message)


async def stored_round(writer: JournalWriter, batch: list[StoredWrite], limits: StoredLimits,
                       now: int) -> list[StoredWrite]:
    """Run one batch at time `now`; returns the writes to decide again in the next round."""
    refused = await writer.unready()
    if refused is not None:
        answer(batch, refusal_of(refused))
        return []
    assert writer.projector is not None
    pending = writer.projector.stored.fork()
    by_lineage: dict[bytes, list[StoredWrite]] = {}
    waiting: list[StoredWrite] = []     # answered without events, decided on pending events of their identity
    touched: set[str] = set()
    for item in batch:
        decision = decide(pending, item.identity, item.command, now, limits)
        if isinstance(decision, StoredRefusal):
            answer([item], decision)
            continue
        try:
            for event in decision.events:
                apply_stored_into(pending, event)
        except StoredApplyError as exc:   # decide accepted what apply refuses: a bug, never journalled
            log.error("stored command %s of %r refused by apply: %s", type(item.command).__name__,
                      item.identity, exc)
            answer([item], StoredRefusal(Reason.UNAVAILABLE, f"the stored core refused its own decision: {exc}"))
            continue
        item.decision = decision
        if decision.events:
            touched.add(item.identity)
            by_lineage.setdefault(identity_lineage(item.identity), []).append(item)
        elif item.identity in touched:
            waiting.append(item)
        else:
            answer([item], Saved(0, decision.key))
    if not by_lineage:
        return []
    plans = []
    for lineage, items in by_lineage.items():
        ticks, where = encode_ticks(writer.projector, writer.boot_id, lineage,   # whole transfers a tick:
                                    [list(i.decision.events) for i in items],   # applied as built
                                    whole=True, chain_min=CHAIN_MIN)
        plans.append((writer.flight(lineage, ticks), items, where))
    flights = [f for f, _, _ in plans]
    if not await writer.write(flights, chain_min=CHAIN_MIN):   # a lineage's ticks: one ack, not a chain
        answer(batch, refusal_of(writer.failed_outcome()))
        return []
    landed: dict[str, bool] = {}
    for f, items, where in plans:
        for item, at in zip(items, where):
            ok = at < len(f.landed)
            landed[item.identity] = landed.get(item.identity, True) and ok
            answer([item], Saved(len(item.decision.events), item.decision.key) if ok
                   else refusal_of(f.error or writer.failed_outcome()))
    await writer.settle(flights)
    again = []
    for item in waiting:
        if landed.get(item.identity, True) and not writer.failed:
            answer([item], Saved(0, item.decision.key))
        else:
            item.decision = None
            again.append(item)
    return again

