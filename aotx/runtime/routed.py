"""`aotx serve --leases`: the in-process gateway of a lease-mode runtime, re-routing to the owner.

Several `aotx serve --leases` processes share one journal; each runtime writes only the lineages whose
lease it holds (aotx.runtime.lease_mode). Each also answers on its rpc subjects (RuntimeRpcServer: the
queue group and its own boot's subject), and its HTTP surfaces use these two ports:

* RoutedRuntime (the shared routes): a command goes to the local runtime, which takes a free lineage's
  lease on the way; when another live runtime holds it, the local answer is 503 `not_owner` naming the
  holder, decided before anything was queued, so the command is sent to the holder (RemoteRuntime: its
  boot subject) and that answer is the client's. Reads stay local: they hold every acknowledged write
  wherever they are answered (aotx.runtime.read_fresh).
* RoutedStored (the stored surfaces, aotx.stored.port): an identity whose lineage this runtime writes (or
  whose free lineage it takes now) is served by the local stored port; any other goes through
  RemoteStored to the runtime that writes it, reads and waits too (the local stored reads do not catch
  up with the log: the owner answers them read-your-writes). A generation runs on the local engine
  either way; only its stored records go to the owner.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..state.mutations import Mutation
from ..state.rights import Actor
from ..stored import Reason, StoredCommand, StoredOutcome, StoredRefusal, identity_lineage
from .lease_mode import lineage_refusal
from .outcome import Outcome
from .rpc import RemoteRuntime, RuntimeRpcServer
from .stored_remote import RemoteStored


def holder_of(out: Outcome) -> str | None:
    """The boot named by a 503 `not_owner` answer, else None."""
    if out.status != 503:
        return None
    err = out.body.get("error") or {}
    holder = err.get("holder") if err.get("type") == "not_owner" else None
    return holder if isinstance(holder, str) and holder else None


class RoutedRuntime:
    """A RuntimePort: the local GrantedRuntime, its commands re-sent to the lineage's holder. `stored`: the
    RoutedStored of the same runtime (`routed`)."""

    def __init__(self, local, remote, server=None) -> None:
        self.local, self.remote = local, remote    # GrantedRuntime, RemoteRuntime
        self.server = server                       # the local runtime's RuntimeRpcServer: stopped first
        self.runtime = local.runtime               # attach_shared: media on the runtime's NATS
        self.forwarded = 0                         # commands sent to another runtime (a test's and an operator's figure)

    @property
    def broker(self):
        return self.local.broker

    @property
    def started(self) -> bool:
        return self.local.started

    @property
    def capacities(self):
        return self.local.capacities

    async def start(self) -> "RoutedRuntime":
        await self.local.start()
        await self.remote.start()
        return self

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        await self.remote.stop()
        await self.local.stop()

    async def submit(self, actor: Actor, mutation: Mutation) -> Outcome:
        out = await self.local.submit(actor, mutation)
        holder = holder_of(out)
        if holder is None or holder == self.runtime.boot_id:
            return out
        self.forwarded += 1
        self.remote.owners[actor.principal] = holder
        return await self.remote.submit(actor, mutation)

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        return await self.local.query(view, actor, **args)

    async def describe(self) -> dict[str, Any]:
        return await self.local.describe()


class RoutedStored:
    """A StoredJournal: the local one for the lineages this runtime writes, else the owner's."""

    def __init__(self, runtime, remote) -> None:
        self.runtime = runtime                     # SharedRuntime (lease mode)
        self.remote_runtime = remote               # RemoteRuntime
        self.local = runtime.stored.journal
        self.remote = RemoteStored(remote)
        self.forwarded = 0

    def _port(self, identity: str):
        if self.runtime.writes(identity_lineage(identity)):
            return self.local
        self.forwarded += 1
        return self.remote

    @property
    def reads(self):
        return _RoutedReads(self)

    async def record(self, identity: str, command: StoredCommand) -> StoredOutcome:
        refused = await lineage_refusal(self.runtime, identity)   # takes a free lineage's lease
        if refused is None:
            return await self.local.record(identity, command)
        holder = holder_of(refused)
        if holder is None:                                        # the lease store did not answer
            return StoredRefusal(Reason.UNAVAILABLE, refused.body["error"]["message"])
        self.forwarded += 1
        self.remote_runtime.owners[identity] = holder
        return await self.remote.record(identity, command)

    async def append_events(self, identity: str, response_id: str, first: int,
                            events: Sequence[bytes]) -> StoredOutcome:
        return await self._port(identity).append_events(identity, response_id, first, events)

    async def wait_events(self, identity: str, response_id: str, seen: int, timeout: float) -> None:
        await self._port(identity).wait_events(identity, response_id, seen, timeout)

    async def wait_key(self, identity: str, surface: str, key: str, seen: int, timeout: float) -> None:
        await self._port(identity).wait_key(identity, surface, key, seen, timeout)

    def on_hold(self) -> bool:
        return self.local.on_hold()


class _RoutedReads:
    def __init__(self, routed: RoutedStored) -> None:
        self._routed = routed

    def __getattr__(self, name: str):
        async def read(identity: str, *args: Any, **page: Any):
            return await getattr(self._routed._port(identity).reads, name)(identity, *args, **page)
        return read


async def routed(local, name: str, config_sha256: str) -> RoutedRuntime:
    """Start answering on the rpc subjects of runtime `name` and return the routing ports of the started
    lease-mode GrantedRuntime `local` (`.stored`: its RoutedStored); RoutedRuntime.stop stops all of it."""
    rt = local.runtime
    server = await RuntimeRpcServer(local, rt.nats_url, name, auth=rt.nats_auth).start()
    try:
        remote = await RemoteRuntime(rt.nats_url, name, config_sha256, auth=rt.nats_auth).start()
    except BaseException:
        await server.stop()
        raise
    port = RoutedRuntime(local, remote, server)
    port.stored = RoutedStored(rt, remote)
    return port
