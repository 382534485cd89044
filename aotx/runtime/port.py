"""What a gateway needs from a shared runtime: the in-process SharedRuntime, the GrantedRuntime in
front of it (the deployment grants) and the split deployment's RemoteRuntime all declare it.

A mutation's body is parsed once, at the edge (`parse_submission`: the route, or the runtime's RPC
server for a body that came over NATS), into the mutation value that `submit` takes; a malformed
body is answered 400 there and reaches no runtime.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..state import MalformedMutation, MutationKind, parse_json_body, parse_mutation
from ..state.mutations import Mutation
from ..state.rights import Actor
from .broker import Broker
from .outcome import Outcome


@runtime_checkable
class RuntimePort(Protocol):
    # where stream readers subscribe to what concerns their operation or conversation
    # (aotx.runtime.broker), fed by this runtime's changes (in process) or its announcements (split)
    broker: Broker

    @property
    def started(self) -> bool:
        """Booted (or, for a remote runtime, connected): commands and reads may be sent."""
        ...

    async def start(self) -> Any:
        """Boot (or connect); idempotent."""
        ...

    async def stop(self) -> None:
        """Stop within a bound; idempotent."""
        ...

    async def submit(self, actor: Actor, mutation: Mutation) -> Outcome:
        """One parsed mutation, answered once resolved (a new operation: after its save)."""
        ...

    async def query(self, view: str, actor: Actor, **args: Any) -> Outcome:
        """A named read (aotx.runtime.views.VIEWS) of the current state."""
        ...

    async def describe(self) -> dict[str, Any]:
        """What /capabilities reports of the runtime: limits, journal status, execution."""
        ...


def parse_submission(kind: MutationKind, raw: bytes, resource: str | None = None) -> Mutation | Outcome:
    """A mutation from raw body bytes (+ the route's space or conversation), or the 400 answer."""
    try:
        return parse_mutation(kind, parse_json_body(raw), resource)
    except MalformedMutation as exc:
        return Outcome.error(400, "invalid_request", str(exc))


async def submit_body(runtime: RuntimePort, actor: Actor, kind: MutationKind, raw: bytes,
                      resource: str | None = None) -> Outcome:
    """Parse a raw body once and submit it (a 400 for a malformed one reaches no runtime)."""
    parsed = parse_submission(kind, raw, resource)
    return parsed if isinstance(parsed, Outcome) else await runtime.submit(actor, parsed)
