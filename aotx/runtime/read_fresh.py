"""Reads on a runtime that shares its journal hold every write acknowledged before they arrived
(docs/SCALE.md §5; docs/CONTRACTS.md, "Hardening: read-your-writes after a lease move").

A runtime in follow or lease mode applies the other runtimes' messages as its follower hears them. The
follower can be far behind: its ordered consumer stalls after a node change until two idle heartbeats are
missed (nats-py checks every 10 s: 10-20 s), and a read that a gateway sends to the queue group (it does not know the
caller's owner, or the client failed over to another gateway) may reach a runtime that is not the writer
of the caller's lineage at all. Answered from the applied state as it stood, such a read missed a write
the caller had been acknowledged for: the cluster drill's 404 for an acknowledged `space.members.set`,
written by the runtime that had just taken the caller's lineage over.

So before a read is answered, the runtime asks the log where it ends now (one STREAM.INFO, shared by
every read that arrived before it was sent: `LogEnd`), and where it has not applied that far it applies
the log up to there under the writer's lock, as the pre-round catch-up of a command round does
(aotx.runtime.catch_up.apply_to: what the follower heard, the rest read back). Every
write acknowledged before the read arrived is at or below that end, whichever runtime and gateway
acknowledged it. The one exemption: a read of the caller's own records (its participant, its own
operations and their results) on the runtime that writes the caller's lineage: that runtime applied each
of its own writes before acknowledging it, and read the log to its end when it took the lineage over.
A runtime alone on its journal (no follower) applies everything it acknowledged: no read waits there.

The wait is bounded (`read_wait` seconds, default READ_WAIT); a log that does not say where it ends in
time, or that cannot be read back, answers 503 `lagging` (the HTTP answer carries Retry-After:
RETRY_AFTER), never a read of a state that may miss an acknowledged write.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping, Optional

import nats.errors

from eventlog import EventLogError

from ..state import lineage_for
from ..state.errors import IdError
from ..state.ids import IdKind, parse_id
from ..state.rights import Actor
from .catch_up import apply_to
from .outcome import Outcome

log = logging.getLogger("aotx.runtime")
READ_WAIT = 2.0      # seconds; below the gateway's request timeout, so the precise 503 is the one that arrives
RETRY_AFTER = 1      # seconds, the Retry-After of a 503 `lagging`
LAGGING = "lagging"
_FAILURES = (EventLogError, nats.errors.Error, OSError, asyncio.TimeoutError)


def lagging(why: str) -> Outcome:
    return Outcome.error(503, LAGGING, f"this runtime could not apply the journal up to where it ended when the "
                         f"read arrived ({why}); an answer could miss a write already acknowledged: retry")


def retry_after(out: Outcome) -> Optional[int]:
    """The Retry-After seconds of an answer (None: it has none)."""
    if out.status == 503 and out.body.get("error", {}).get("type") == LAGGING:
        return RETRY_AFTER
    return None


def own_records(runtime, view: str, actor: Actor, args: Mapping[str, Any]) -> bool:
    """A read of the caller's own records on the runtime that writes the caller's lineage."""
    lineage = lineage_for(actor.principal)
    if view == "participant":
        if args.get("participant") is not None:
            return False
    elif view in ("operation", "result"):
        try:
            if parse_id(args.get("op"), IdKind.OPERATION).lineage != lineage:
                return False
        except IdError:
            return True   # a malformed handle is answered 400 on any state
    else:
        return False
    return runtime.writes(lineage)


class LogEnd:
    """The stream's last sequence, asked of the log after a read arrived. At most one STREAM.INFO is in
    flight; the reads that arrive meanwhile share the next one (sent after all of them arrived)."""

    def __init__(self, writer) -> None:
        self.writer = writer
        self._next: Optional[asyncio.Future] = None
        self._task: Optional[asyncio.Task] = None

    def ask(self) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
            self._next.add_done_callback(_retrieved)
        if self._task is None:
            self._task = loop.create_task(self._run(), name="aotx read log end")
        return self._next

    async def _run(self) -> None:
        try:
            while self._next is not None:
                fut, self._next = self._next, None
                try:
                    info = await (await self.writer.connection.ensure()).stream_info()
                except _FAILURES as exc:
                    if not fut.done():
                        fut.set_exception(exc)
                else:
                    if not fut.done():
                        fut.set_result(info.last_seq)
        finally:
            self._task = None

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._next is not None and not self._next.done():
            self._next.cancel()
        self._next = None


def _retrieved(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()   # every waiter may have timed out: the exception counts as seen


async def fresh(runtime, view: str, actor: Actor, args: Mapping[str, Any]) -> Optional[Outcome]:
    """None when the read may be answered from the applied state now (caught up first where needed);
    else its 503 `lagging` (or the stopped runtime's 503)."""
    if runtime.follower is None or own_records(runtime, view, actor, args):
        return None
    w, wait = runtime.writer, runtime.read_wait
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    try:
        end = await asyncio.wait_for(asyncio.shield(runtime.log_end.ask()), wait)
    except _FAILURES as exc:
        log.info("read catch-up: stream_info failed (%s: %s)", type(exc).__name__, exc)
        why = f"the journal did not say where it ends within {wait:g} s" if isinstance(exc, asyncio.TimeoutError) \
            else f"stream_info: {type(exc).__name__}"
        return lagging(why)
    if w.applied_seq() >= end:
        return None
    # the follower is behind (or stalled): read the rest back in stream order, as a round's catch-up does
    try:
        await asyncio.wait_for(w.lock.acquire(), max(0.0, deadline - loop.time()))
    except asyncio.TimeoutError:
        return lagging(f"the writer stayed busy for {wait:g} s")
    try:
        if w.applied_seq() < end and not await apply_to(w, end):
            return w.failed_outcome() if w.failed else lagging(w.hold.last_error or "read-back")
    finally:
        w.lock.release()
    return None
