"""Split deployment: the runtime answers shared commands and reads over NATS request/reply.

Subject `aotx.rt.<name>.cmd` (queue group `aotx-runtime`). Request and reply are msgpack maps:

    request {"v": 1, "op": "submit" | "query" | "describe", "principal": str,
             "grants": [actions the gateway grants], "config_sha256": hex of the gateway config,
             submit: "kind": int, "raw": bytes, "space": str | None; query: "view": str, "args": {}}
    reply   {"status": int, "body": {...}}

A submit's `raw` is a mutation body as a client POSTs it (the gateway sends the body of the
mutation it parsed: aotx.state.mutation_forms.request_body); the server parses it once, at its edge.

After each change of its state (a journal message applied) the runtime publishes an empty message
on `aotx.rt.<name>.changed` (at most one per ANNOUNCE_INTERVAL); a RemoteRuntime's wait_change
returns on it, so a gateway's SSE streams read again as soon as there is something new (and at
least every timeout when announcements are lost, e.g. while the runtime restarts).

The gateway authenticates the bearer token and sends only the principal's name and grants,
never the token. The runtime answers with the caller's grants ∩ its deployment grant file, and
refuses (503 grants_mismatch) a gateway whose config is not the one the grant file was issued for.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

import msgpack
import nats.errors

from eventlog import NatsAuth, OutageLog, close_connection, connect, drain_connection

from ..state import Grants, MutationKind, canonical_json
from ..state.mutation_forms import request_body
from ..state.mutations import Mutation
from ..state.rights import Actor
from .granted import GrantedRuntime, actions_of, grants_of
from .outcome import Outcome
from .port import RuntimePort, parse_submission

log = logging.getLogger("aotx.runtime.rpc")
RPC_VERSION = 1
QUEUE = "aotx-runtime"
_STOP_TIMEOUT = 2.0        # seconds stop() waits for requests being answered
ANNOUNCE_INTERVAL = 0.02   # seconds: state-change announcements are coalesced to at most one per interval
# (RemoteRuntime id, announcements it had seen) when the current task last sent a request: wait_change
# returns at once when one arrived since, so a change announced during a read is never waited for
_SENT_AT: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("aotx_rpc_sent_at", default=None)


def rpc_subject(name: str) -> str:
    return f"aotx.rt.{name}.cmd"


def changed_subject(name: str) -> str:
    return f"aotx.rt.{name}.changed"


async def _connect(url: str, name: str, auth: NatsAuth | None):
    """A connection that reconnects forever; an outage is logged once, not once per attempt."""
    outage = OutageLog(log, name, url)
    return await connect(url, auth, name=name, error_cb=outage.error, reconnected_cb=outage.reconnected,
                         max_reconnect_attempts=-1, reconnect_time_wait=0.2)


class RuntimeRpcServer:
    """Serves a GrantedRuntime on its subject until stop()."""

    def __init__(self, target: GrantedRuntime, nats_url: str, name: str, *, auth: NatsAuth | None = None) -> None:
        self.target, self.nats_url, self.subject = target, nats_url, rpc_subject(name)
        self.nats_auth = auth
        self.changed = changed_subject(name)
        self._nc = None
        self._tasks: set[asyncio.Task] = set()
        self._announcer: asyncio.Task | None = None

    async def start(self) -> "RuntimeRpcServer":
        self._nc = await _connect(self.nats_url, f"aotx-runtime-rpc-{self.subject}", self.nats_auth)
        await self._nc.subscribe(self.subject, queue=QUEUE, cb=self._on_message)
        await self._nc.flush()
        self._announcer = asyncio.get_running_loop().create_task(self._announce())
        return self

    async def stop(self) -> None:
        if self._announcer is not None:
            self._announcer.cancel()
            await asyncio.gather(self._announcer, return_exceptions=True)
            self._announcer = None
        await drain_connection(self._nc, name=self.subject)   # bounded, also when nats-server is gone
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=_STOP_TIMEOUT)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        self._nc = None

    async def _announce(self) -> None:
        """Publish on the changed subject after every state change, at most once per ANNOUNCE_INTERVAL."""
        runtime = getattr(self.target, "runtime", self.target)

        def mark() -> tuple[int, int] | None:
            proj = runtime.projector
            return None if proj is None else (id(proj), proj.messages)

        seen = mark()
        while True:
            if mark() == seen:  # nothing new: sleep until the runtime applies the next message
                await self.target.wait_change(30.0)
                continue
            seen = mark()
            try:
                await self._nc.publish(self.changed, b"")
            except Exception as exc:  # NATS away: readers fall back to their timeout
                log.debug("state-change announcement not sent: %s", exc)
            await asyncio.sleep(ANNOUNCE_INTERVAL)

    async def _on_message(self, msg) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, msg) -> None:
        try:
            out = await self.dispatch(msgpack.unpackb(msg.data, raw=False))
        except Exception as exc:  # a malformed request or a bug: answer, never leave the caller waiting
            log.exception("runtime request failed")
            out = Outcome.error(500, "internal", f"the runtime could not answer: {type(exc).__name__}")
        try:
            await msg.respond(msgpack.packb({"status": out.status, "body": out.body}, use_bin_type=True))
        except nats.errors.Error as exc:
            log.warning("runtime reply not sent: %s", exc)

    async def dispatch(self, req: Any) -> Outcome:
        if not isinstance(req, dict) or req.get("v") != RPC_VERSION:
            return Outcome.error(400, "invalid_request", f"runtime requests must be version {RPC_VERSION} maps")
        principal, grants = req.get("principal"), req.get("grants")
        if not isinstance(principal, str) or not isinstance(grants, list):
            return Outcome.error(400, "invalid_request", "principal and grants are required")
        want = self.target.grants.config_sha256
        if req.get("config_sha256") != want:
            return Outcome.error(503, "grants_mismatch",
                                 "the runtime's deployment grants were issued for another gateway config; "
                                 "issue fresh grants with `aotx grants` and send the runtime SIGHUP (or restart it)")
        actor = Actor(principal, grants_of(g for g in grants if isinstance(g, str)))
        op = req.get("op")
        if op == "describe":
            return Outcome(200, await self.target.describe())
        if not self.target.started:
            return Outcome.error(503, "unavailable", "the shared runtime is still booting")
        if op == "submit":
            raw, space = req.get("raw"), req.get("space")
            try:
                kind = MutationKind(req.get("kind"))
            except ValueError:
                return Outcome.error(400, "invalid_request", f"unknown mutation kind {req.get('kind')!r}")
            if not isinstance(raw, bytes) or not (space is None or isinstance(space, str)):
                return Outcome.error(400, "invalid_request", "submit needs raw bytes and an optional space")
            parsed = parse_submission(kind, raw, space)   # the body is parsed once in this process
            return parsed if isinstance(parsed, Outcome) else await self.target.submit(actor, parsed)
        if op == "query":
            view, args = req.get("view"), req.get("args") or {}
            if not isinstance(view, str) or not isinstance(args, dict):
                return Outcome.error(400, "invalid_request", "query needs a view name and an args map")
            return await self.target.query(view, actor, **args)
        return Outcome.error(400, "invalid_request", f"unknown runtime operation {op!r}")


class RemoteRuntime(RuntimePort):
    """The gateway's side: the same surface as SharedRuntime for the shared blueprint."""

    def __init__(self, nats_url: str, name: str, config_sha256: str, *, timeout: float = 10.0,
                 auth: NatsAuth | None = None) -> None:
        self.nats_url, self.subject, self.config_sha256 = nats_url, rpc_subject(name), config_sha256
        self.nats_auth = auth   # also the media store's credentials (attach_shared)
        self.changed = changed_subject(name)
        self.timeout = timeout
        self._nc = None
        self._announced = 0                          # state-change announcements heard
        self._change: asyncio.Event | None = None    # set (and replaced) by the next announcement

    @property
    def started(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def start(self) -> "RemoteRuntime":
        if self._nc is None:
            self._nc = await _connect(self.nats_url, "aotx-gateway", self.nats_auth)
            await self._nc.subscribe(self.changed, cb=self._on_changed)
        return self

    async def stop(self) -> None:
        await close_connection(self._nc, name="aotx-gateway")   # bounded, also when nats-server is gone
        self._nc = None

    async def _on_changed(self, _msg) -> None:
        self._announced += 1
        if self._change is not None:
            self._change.set()
            self._change = None

    async def wait_change(self, timeout: float) -> None:
        """Return when the runtime announces its next state change, or after `timeout` seconds; at
        once when one was announced since this task last sent a request (its answer may predate it)."""
        sent = _SENT_AT.get()
        _SENT_AT.set(None)
        if sent is not None and sent[0] == id(self) and sent[1] != self._announced:
            await asyncio.sleep(0)
            return
        if self._change is None:
            self._change = asyncio.Event()
        try:
            await asyncio.wait_for(self._change.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def _call(self, actor: Actor, op: str, **fields: Any) -> Outcome:
        if self._nc is None:
            return Outcome.error(503, "unavailable", "the gateway is not connected to NATS")
        req = {"v": RPC_VERSION, "op": op, "principal": actor.principal, "grants": actions_of(actor.grants),
               "config_sha256": self.config_sha256, **fields}
        _SENT_AT.set((id(self), self._announced))
        try:
            msg = await self._nc.request(self.subject, msgpack.packb(req, use_bin_type=True), timeout=self.timeout)
        except nats.errors.NoRespondersError:
            return Outcome.error(503, "runtime_unavailable", f"no runtime answers on {self.subject}; "
                                 "retry later with the same input")
        except nats.errors.TimeoutError:
            return Outcome.error(503, "runtime_unavailable", f"the runtime did not answer within {self.timeout:g} s; "
                                 "retry later with the same input")
        except nats.errors.MaxPayloadError:
            return Outcome.error(413, "too_large", "the request exceeds the NATS payload limit between gateway "
                                 "and runtime")
        except nats.errors.Error as exc:  # connection closed or draining, buffer full: the outcome is unknown
            return Outcome.error(503, "runtime_unavailable", f"the runtime could not be reached ({type(exc).__name__}); "
                                 "retry later with the same input")
        reply = msgpack.unpackb(msg.data, raw=False)
        return Outcome(int(reply["status"]), reply["body"])

    async def submit(self, actor: Actor, mutation: Mutation) -> Outcome:
        """The parsed mutation travels as the request body a client would POST (+ its route's
        resource): the runtime parses it once on its side."""
        body, resource = request_body(mutation)
        return await self._call(actor, "submit", kind=int(mutation.kind), raw=canonical_json(body), space=resource)

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        return await self._call(actor, "query", view=view, args=args)

    async def describe(self, actor: Actor | None = None) -> dict[str, Any]:
        out = await self._call(actor or Actor("", Grants()), "describe")
        if out.status != 200:
            return {"limits": None, "journal": None, "runtime_error": out.body.get("error")}
        return out.body
