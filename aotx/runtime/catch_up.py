"""The pre-round catch-up of follow mode (docs/SCALE.md §3): a round is decided on a state that holds
the log at least as it was when the round began.

The follower applies the other runtimes' messages as the log pushes them, a little behind. Before a
command round is decided, a runtime that shares its journal reads the stream's last sequence (one
STREAM.INFO per round, which group commit amortises over the round's commands) and, where it has not
applied that far, reads the log back up to it (aotx.runtime.writer read_back: every subject, in stream
order). So a revocation that another runtime had acknowledged before a command's round began is seen
by its decision, and a table's rows taken by the others are counted. A log that does not answer
refuses the round (503 `journal_unavailable`: nothing was decided or written; retry), since its
decisions could not be said to follow the log.
"""

from __future__ import annotations

import logging

import nats.errors

from eventlog import EventLogError

from .outcome import Outcome

log = logging.getLogger("aotx.runtime")


def _unavailable(why: str) -> Outcome:
    return Outcome.error(503, "journal_unavailable", f"the journal did not answer before this round was decided "
                         f"({why}); nothing was changed, retry with the same input")


async def catch_up(writer) -> Outcome | None:
    """Apply the log up to its last sequence now; None when done, else the round's refusal."""
    try:
        info = await (await writer.connection.ensure()).stream_info()
    except (EventLogError, nats.errors.Error, OSError, TimeoutError) as exc:
        log.info("catch-up: stream_info failed (%s: %s)", type(exc).__name__, exc)
        return _unavailable(f"stream_info: {type(exc).__name__}")
    if info.last_seq <= writer.applied_seq():
        return None
    if not await writer.read_back(upto=info.last_seq):
        return writer.failed_outcome() if writer.failed else _unavailable(writer.hold.last_error or "read-back")
    return None
