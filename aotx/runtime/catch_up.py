"""Follow mode's pre-round catch-up (docs/SCALE.md §3): a command round decides on the log as it stood
when its commands arrived, not on what the follower happens to have applied.

With several runtimes on one journal, a decision may read another runtime's lineage (a member row of
alice's space decides whether bob may write there). The follower applies the others' messages milliseconds
after they land, but a command that arrives in those milliseconds must not be decided on the older state:
a revocation (or a grant) acknowledged before the command was received is seen by it. So before each command
round (under the writer's lock, where rounds and the follower take turns) the runtime asks the stream for
its last sequence — one STREAM.INFO per round, shared by every command of the round — and, where that is
beyond what it applied, reads the log back up to it (the writer's read-back: stream order, the same feed).
A log that does not answer refuses the round's commands with a retryable 503; nothing is decided or written.
A runtime alone on its journal has nothing to catch up: everything in the log is its own, applied from acks.
"""

from __future__ import annotations

import asyncio
import logging

import nats.errors

from eventlog import EventLogError

from .outcome import Outcome

log = logging.getLogger("aotx.runtime")


class CatchUp:
    def __init__(self, writer) -> None:
        self.writer = writer
        self.rounds = 0       # rounds that asked the stream where it ends
        self.read_backs = 0   # of which the log held messages not applied yet

    async def before_round(self) -> Outcome | None:
        """None once everything the log held at this moment is applied; else the refusal for the round."""
        w = self.writer
        self.rounds += 1
        try:
            last = (await (await w.connection.ensure()).stream_info()).last_seq
        except (EventLogError, nats.errors.Error, OSError, asyncio.TimeoutError) as exc:
            log.info("pre-round catch-up: the journal did not say where it ends: %s: %s", type(exc).__name__, exc)
            return _unavailable(f"the journal did not answer ({type(exc).__name__}: {exc})")
        if last <= w.applied_seq():
            return None
        self.read_backs += 1
        if await w.read_back(upto=last) and w.applied_seq() >= last:
            return None
        if w.failed:
            return w.failed_outcome()
        return _unavailable(f"reading the journal up to sequence {last} failed ({w.hold.last_error})")


def _unavailable(why: str) -> Outcome:
    return Outcome.error(503, "journal_unavailable",
                         f"{why}; the command was not decided, retry later with the same input")
