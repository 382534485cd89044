"""GrantedRuntime: the runtime behind the deployment grant file.

Every command and read runs with the caller's grants ∩ the grant file's actions for that
principal (a principal the grant file does not name has none); the state's own rules then
intersect those with stored membership. The grant file carries no credentials.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..runtime_file import GrantFile
from ..state import Grants, lineage_for
from ..state.mutations import Mutation
from ..state.rights import Actor
from .broker import Broker
from .outcome import Outcome
from .port import RuntimePort
from .runtime import SharedRuntime
from .targets import ChangeFeed


def grants_of(actions: Iterable[str]) -> Grants:
    got = set(actions)
    return Grants(shared_read="shared_read" in got, shared_write="shared_write" in got,
                  shared_manage="shared_manage" in got)


def actions_of(grants: Grants) -> list[str]:
    return [name for name in ("shared_manage", "shared_read", "shared_write") if getattr(grants, name)]


class GrantedRuntime(RuntimePort):
    def __init__(self, runtime: SharedRuntime, grants: GrantFile) -> None:
        self.runtime, self.grants = runtime, grants
        runtime.author_grants = self.author_grants   # recall reads an author's grants from the same file

    def replace_grants(self, grants: GrantFile) -> None:
        """Use another (fresh, already checked) grant file from now on: the next command or read of
        every principal, each new read of an open stream and the next recall intersect with it.
        Every open stream reads again now (rights may have shrunk), here and through the announcer."""
        self.grants = grants
        self.runtime.changes.everyone()

    def author_grants(self, lineage: bytes) -> Grants:
        """The grant file's current actions of the principal whose lineage this is (none if unnamed)."""
        for name, actions in self.grants.principals.items():
            if lineage_for(name) == lineage:
                return grants_of(actions)
        return Grants()

    @property
    def started(self) -> bool:
        return self.runtime.started

    @property
    def capacities(self):
        return self.runtime.capacities

    async def start(self) -> "GrantedRuntime":
        await self.runtime.start()
        return self

    async def stop(self) -> None:
        await self.runtime.stop()

    def actor(self, actor: Actor) -> Actor:
        allowed = self.grants.actions_of(actor.principal)
        return Actor(actor.principal, grants_of(set(actions_of(actor.grants)) & allowed))

    async def submit(self, actor: Actor, mutation: Mutation) -> Outcome:
        return await self.runtime.submit(self.actor(actor), mutation)

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        return await self.runtime.query(view, self.actor(actor), **args)

    @property
    def broker(self) -> Broker:
        return self.runtime.broker

    @property
    def changes(self) -> ChangeFeed:
        """What each applied message concerns (the RPC server's announcer is a sink of it)."""
        return self.runtime.changes

    def attach_service(self, service: Any) -> None:
        self.runtime.attach_service(service)

    async def describe(self) -> dict[str, Any]:
        out = await self.runtime.describe()
        out["grants"] = {"issued_at": self.grants.issued_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "config_sha256": self.grants.config_sha256}
        return out
