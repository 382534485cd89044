"""Split deployment: the runtime answers shared commands and reads over NATS request/reply.

Subject `aotx.rt.<name>.cmd` (queue group `aotx-runtime`). Request and reply are msgpack maps:

    request {"v": 1, "op": "submit" | "query" | "describe", "principal": str,
             "grants": [actions the gateway grants], "config_sha256": hex of the gateway config,
             submit: "kind": int, "raw": bytes, "space": str | None; query: "view": str, "args": {}}
    reply   {"status": int, "body": {...}}

A submit's `raw` is a mutation body as a client POSTs it (the gateway sends the body of the
mutation it parsed: aotx.state.mutation_forms.request_body); the server parses it once, at its edge.

After each applied journal message the runtime announces what it concerns on
`aotx.rt.<name>.changed` (aotx.runtime.announce: the operations, conversations and retirements
concerned; changes coalesced to at most one announcement per ANNOUNCE_INTERVAL); on start, after a
reconnect, after a lost announcement and after its grants were reloaded it announces "all". A
RemoteRuntime feeds them to its broker (aotx.runtime.broker), so a gateway's stream reader reads
again only when something it follows changed; after its own reconnect (announcements may have been
lost) every reader reads again. Nothing polls.

The gateway authenticates the bearer token and sends only the principal's name and grants,
never the token. The runtime answers with the caller's grants ∩ its deployment grant file, and
refuses (503 grants_mismatch) a gateway whose config is not the one the grant file was issued for.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

import msgpack
import nats.errors

from eventlog import NatsAuth, OutageLog, close_connection, connect, drain_connection, flush_subscriptions

from ..state import Grants, MutationKind, canonical_json
from ..state.mutation_forms import request_body
from ..state.mutations import Mutation
from ..state.rights import Actor
from .announce import AnnouncementError, pack_targets, unpack_targets
from .broker import Broker
from .granted import GrantedRuntime, actions_of, grants_of
from .outcome import Outcome
from .port import RuntimePort, parse_submission
from .round_stats import STATS, clock
from .stored_rpc import answer_stored
from .targets import Targets

log = logging.getLogger("aotx.runtime.rpc")
RPC_VERSION = 1
QUEUE = "aotx-runtime"
_STOP_TIMEOUT = 2.0        # seconds stop() waits for requests being answered
ANNOUNCE_INTERVAL = 0.02   # seconds: state-change announcements are coalesced to at most one per interval


class Undelivered(Outcome):
    """The 503 of a request that reached no runtime (no responders): certainly not applied."""


def rpc_subject(name: str) -> str:
    return f"aotx.rt.{name}.cmd"


def changed_subject(name: str) -> str:
    return f"aotx.rt.{name}.changed"


def reply_prefix(name: str) -> str:
    """Where a gateway (RemoteRuntime) hears the answers to its runtime requests: its connection's inbox
    prefix, `aotx.rt.<name>.reply.<nuid>.<token>`. A runtime user may publish there by a static permission,
    not only through `allow_responses`, which nats-server tracks per connection: a runtime whose
    connection moved to another node after it received a request could not answer it (docs/CONTRACTS.md,
    "Hardening: a moved connection answers")."""
    return f"aotx.rt.{name}.reply"


def boot_subject(name: str, boot: str) -> str:
    """Where one runtime boot of `name` answers alone (lease mode: a gateway sends a lineage's
    commands to the boot that holds it; docs/SCALE.md §4)."""
    return f"aotx.rt.{name}.boot.{boot}"


async def _connect(url: str, name: str, auth: NatsAuth | None, lost: Callable[[], None] = lambda: None,
                   **options: Any):
    """A connection that reconnects forever; an outage is logged once, not once per attempt. `lost`:
    called when messages to or from it may have been lost (a reconnect, a slow consumer)."""
    outage = OutageLog(log, name, url)

    async def error(exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            lost()
        await outage.error(exc)

    async def reconnected() -> None:
        lost()
        await outage.reconnected()

    return await connect(url, auth, name=name, error_cb=error, reconnected_cb=reconnected,
                         max_reconnect_attempts=-1, reconnect_time_wait=0.2, **options)


class RuntimeRpcServer:
    """Serves a GrantedRuntime on its subject until stop()."""

    def __init__(self, target: GrantedRuntime, nats_url: str, name: str, *, auth: NatsAuth | None = None) -> None:
        self.target, self.nats_url, self.subject = target, nats_url, rpc_subject(name)
        self.name = name
        self.nats_auth = auth
        self.changed = changed_subject(name)
        self._nc = None
        self._tasks: set[asyncio.Task] = set()
        self._announcer: asyncio.Task | None = None
        self._pending = Targets(everyone=True)   # a (re)started runtime: every reader reads again
        self._due: asyncio.Event | None = None

    async def start(self) -> "RuntimeRpcServer":
        self._due = asyncio.Event()
        self._nc = await _connect(self.nats_url, f"aotx-runtime-rpc-{self.subject}", self.nats_auth, self._lost)
        await self._nc.subscribe(self.subject, queue=QUEUE, cb=self._on_message)
        # this boot alone (where gateways route a lineage's commands to the runtime that holds it)
        await self._nc.subscribe(boot_subject(self.name, self.target.runtime.boot_id), cb=self._on_message)
        await flush_subscriptions(self._nc)   # the server has the SUBs (not flush() alone)
        self.target.changes.add_coalescing(self)   # (what each applied message changed: added to _pending)
        self._due.set()
        self._announcer = asyncio.get_running_loop().create_task(self._announce())
        return self

    async def stop(self) -> None:
        self.target.changes.remove_coalescing(self)
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

    def _heard(self, targets: Targets) -> None:
        """Add to the next announcement."""
        self._pending.merge(targets, deltas=False)
        self.due()

    def pending(self) -> Targets:
        """A coalescing sink of the runtime's change feed (aotx.runtime.targets): the next announcement's targets."""
        return self._pending

    def due(self) -> None:
        if self._due is not None:
            self._due.set()

    def _lost(self) -> None:
        """Announcements may have been lost (a reconnect): the next one tells every reader."""
        self._heard(Targets(everyone=True))

    async def _announce(self) -> None:
        """Publish what changed, at most once per ANNOUNCE_INTERVAL (changes in between coalesce)."""
        assert self._due is not None
        while True:
            await self._due.wait()
            self._due.clear()
            pending, self._pending = self._pending, Targets()
            # spaces whose rights changed, named as what is in them now: once an announcement, not an event
            data = pack_targets(self.target.changes.concrete(pending))
            if len(data) > self._nc.max_payload:   # too much to name: every reader reads again
                data = pack_targets(Targets(everyone=True))
            try:
                await self._nc.publish(self.changed, data)
            except nats.errors.Error as exc:   # not sent: the next announcement tells every reader
                log.warning("state-change announcement not sent (%s: %s); the next one resyncs every reader",
                            type(exc).__name__, exc)
                self._lost()
            await asyncio.sleep(ANNOUNCE_INTERVAL)

    async def _on_message(self, msg) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, msg) -> None:
        t0 = clock() if STATS.on else 0.0
        try:
            out = await self.dispatch(msgpack.unpackb(msg.data, raw=False))
        except Exception as exc:  # a malformed request or a bug: answer, never leave the caller waiting
            log.exception("runtime request failed")
            out = Outcome.error(500, "internal", f"the runtime could not answer: {type(exc).__name__}")
        try:
            await msg.respond(msgpack.packb({"status": out.status, "body": out.body}, use_bin_type=True))
        except nats.errors.Error as exc:
            log.warning("runtime reply not sent: %s", exc)
        if STATS.on:
            STATS.add("rpc_s", clock() - t0)
            STATS.add("rpc_requests")
            STATS.add(f"rpc_status_{out.status}")

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
        if op == "stored":   # the stored port of a gateway's standard surfaces (aotx.runtime.stored_rpc)
            return await answer_stored(self.target.runtime, req)
        return Outcome.error(400, "invalid_request", f"unknown runtime operation {op!r}")


class RemoteRuntime(RuntimePort):
    """The gateway's side: the same surface as SharedRuntime for the shared blueprint."""

    def __init__(self, nats_url: str, name: str, config_sha256: str, *, timeout: float = 10.0,
                 auth: NatsAuth | None = None, home: str | None = None) -> None:
        self.nats_url, self.subject, self.config_sha256 = nats_url, rpc_subject(name), config_sha256
        self.name = name
        self.owners: dict[str, str] = {}   # principal → the runtime boot that writes its lineage (lease mode)
        # the boot asked where the caller's writer is not known, instead of the queue group (an HTTP worker of
        # `aotx serve --leases`: its own instance's runtime, which takes a free lineage as the instance would)
        self.home = home
        self.nats_auth = auth   # also the media store's credentials (attach_shared)
        self.changed = changed_subject(name)
        self.timeout = timeout
        self._nc = None
        self.broker = Broker()   # the gateway's stream readers, fed by the runtime's announcements
        self.announcements = 0   # heard (test hook)

    @property
    def started(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def start(self) -> "RemoteRuntime":
        if self._nc is None:
            self._nc = await _connect(self.nats_url, "aotx-gateway", self.nats_auth, self.broker.resync_all,
                                      inbox_prefix=reply_prefix(self.name))
            await self._nc.subscribe(self.changed, cb=self._on_changed)
        return self

    async def stop(self) -> None:
        await close_connection(self._nc, name="aotx-gateway")   # bounded, also when nats-server is gone
        self._nc = None

    async def _on_changed(self, msg) -> None:
        self.announcements += 1
        try:
            targets = unpack_targets(msg.data)
        except AnnouncementError as exc:
            log.warning("a state-change announcement on %s did not parse (%s); every reader reads again",
                        self.changed, exc)
            targets = Targets(everyone=True)
        self.broker.deliver(targets)

    async def _call(self, actor: Actor, op: str, *, command: bool | None = None, **fields: Any) -> Outcome:
        """One request, to the runtime that writes the caller's lineage where it is known (several
        runtimes in lease mode), else to `home` where given, else to any runtime (the queue group). A `not_owner` answer names
        the holder: the request goes there once more, and the holder is remembered. A holder that is
        gone is forgotten; a command goes to the queue group at once only when it reached no one (no
        responders; a read always does): one that reached the holder without an answer may have been
        applied, and a second send would answer the first one's receipt (200) to a client that sent
        once. Its 503 goes back; the client's exact retry settles it (docs/CONTRACTS.md, "Hardening:
        the cluster drill"). A new operation's receipt names the boot that saved it (`save.boot`, the
        lineage's writer): that boot is remembered too, so the caller's own reads reach the runtime that
        applied its writes (docs/CONTRACTS.md, "Hardening: read-your-writes after a lease move"). A stored
        call's answer names its runtime (`writer`) where that runtime writes the caller's lineage: the same.
        `command`: whether a second send could apply it twice (default: a shared `submit`)."""
        command = op == "submit" if command is None else command
        if self._nc is None:
            return Outcome.error(503, "unavailable", "the gateway is not connected to NATS")
        req = msgpack.packb({"v": RPC_VERSION, "op": op, "principal": actor.principal,
                             "grants": actions_of(actor.grants), "config_sha256": self.config_sha256, **fields},
                            use_bin_type=True)
        holder = self.owners.get(actor.principal) or self.home
        out = await self._request(self.subject if holder is None else boot_subject(self.name, holder), req)
        if holder is not None and out.status == 503 and out.body.get("error", {}).get("type") == "runtime_unavailable":
            self.owners.pop(actor.principal, None)   # that boot is gone: any runtime (one takes it over)
            if command and not isinstance(out, Undelivered):
                return out                        # in doubt: the client's exact retry settles it
            out = await self._request(self.subject, req)
        moved = out.body.get("error", {}).get("holder") if out.status == 503 else None
        if isinstance(moved, str) and moved and moved != holder:
            self.owners[actor.principal] = moved
            out = await self._request(boot_subject(self.name, moved), req)
        if op == "submit" and out.status in (201, 202):   # a new operation: saved by the lineage's writer now
            writer = (out.body.get("save") or {}).get("boot")
            if isinstance(writer, str) and writer:
                self.owners[actor.principal] = writer   # its next commands and own reads go there
        elif op == "stored" and out.status == 200:   # answered by the lineage's writer: it says so
            writer = out.body.get("writer")
            if isinstance(writer, str) and writer:
                self.owners[actor.principal] = writer
        return out

    async def _request(self, subject: str, req: bytes) -> Outcome:
        try:
            msg = await self._nc.request(subject, req, timeout=self.timeout)
        except nats.errors.NoRespondersError:   # it reached no one: certainly not applied
            return Undelivered.error(503, "runtime_unavailable", f"no runtime answers on {subject}; "
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

    async def stored_call(self, identity: str, call: str, args: bytes, *, write: bool) -> Outcome:
        """One call of the stored port (aotx.runtime.stored_remote) for `identity` (the principal whose
        lineage orders its records), to the runtime that writes that lineage."""
        return await self._call(Actor(identity, Grants()), "stored", command=write, call=call, identity=identity,
                                args=args)

    async def describe(self, actor: Actor | None = None) -> dict[str, Any]:
        out = await self._call(actor or Actor("", Grants()), "describe")
        if out.status != 200:
            return {"limits": None, "journal": None, "runtime_error": out.body.get("error")}
        return out.body
