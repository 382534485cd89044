"""The pre-round catch-up of follow mode (docs/SCALE.md §3): a round is decided on a state that holds
the log at least as it was when the round began.

The follower applies the other runtimes' messages as the log pushes them, a little behind. Before a
command round is decided, a runtime that shares its journal reads the stream's last sequence (one
STREAM.INFO per round, which group commit amortises over the round's commands) and, where it has not
applied that far, applies the log up to it (`apply_to`: every subject, in stream order — what the
follower's consumer pushed, waiting for it at most FOLLOW_WAIT seconds, and only what did not come in that
time read back from the log, aotx.runtime.writer read_back; a round's own acknowledged messages with other
writers' between them take those the same way: aotx.runtime.write_order). So a revocation that another runtime had acknowledged before a command's round began is seen
by its decision, and a table's rows taken by the others are counted. A log that does not answer
refuses the round (503 `journal_unavailable`: nothing was decided or written; retry), since its
decisions could not be said to follow the log.
"""

from __future__ import annotations

import logging
import os

import nats.errors

from eventlog import EventLogError

from .outcome import Outcome
from .round_stats import STATS, clock

log = logging.getLogger("aotx.runtime")
FOLLOW_WAIT_ENV = "AOTX_FOLLOW_WAIT"   # seconds; 0 reads the log back at once, as before (for an A/B)


def wait_from(raw: str | None, default: float = 0.02) -> float:
    """Seconds a round waits for the follower's consumer, from the environment's text (unset or not a
    number ≥ 0: the default)."""
    try:
        value = float((raw or "").strip())
    except ValueError:
        if raw and raw.strip():
            log.warning("%s=%r is not a number of seconds: %g", FOLLOW_WAIT_ENV, raw, default)
        return default
    return value if value >= 0 else default


FOLLOW_WAIT = wait_from(os.environ.get(FOLLOW_WAIT_ENV))   # a round's wait for what the consumer pushes, at most


def _unavailable(why: str) -> Outcome:
    return Outcome.error(503, "journal_unavailable", f"the journal did not answer before this round was decided "
                         f"({why}); nothing was changed, retry with the same input")


async def catch_up(writer) -> Outcome | None:
    """Apply the log up to its last sequence now; None when done, else the round's refusal."""
    t0 = clock() if STATS.on else 0.0
    try:
        info = await (await writer.connection.ensure()).stream_info()
    except (EventLogError, nats.errors.Error, OSError, TimeoutError) as exc:
        log.info("catch-up: stream_info failed (%s: %s)", type(exc).__name__, exc)
        return _unavailable(f"stream_info: {type(exc).__name__}")
    if STATS.on:
        t1 = clock()
        STATS.add("catchup_info_s", t1 - t0)
        STATS.add("catchups")
        t0, before = t1, writer.applied_seq()
    if info.last_seq <= writer.applied_seq():
        return None
    ok = await apply_to(writer, info.last_seq)
    if STATS.on:
        STATS.add("catchup_read_s", clock() - t0)
        STATS.add("catchup_reads")
        STATS.add("catchup_msgs", writer.applied_seq() - before)
    if not ok:
        return writer.failed_outcome() if writer.failed else _unavailable(writer.hold.last_error or "read-back")
    return None


async def apply_to(writer, upto: int) -> bool:
    """Under the writer's lock: apply the log up to stream sequence `upto`, in stream order — what the
    follower heard already (or hears within FOLLOW_WAIT), the rest read back. False when the log did not
    answer the read-back (the hold's last error says why) or applying failed (the writer stopped)."""
    follower = writer.follower
    if follower is not None and FOLLOW_WAIT > 0:
        t0 = clock() if STATS.on else 0.0
        done = await follower.catch_up(upto, FOLLOW_WAIT)
        if STATS.on:
            STATS.add("followed_to_s", clock() - t0)
            STATS.add("followed_to" if done else "followed_to_short")
        if done or writer.failed:
            return done
    return await writer.read_back(upto=upto)
