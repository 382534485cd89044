"""The key gate of one request: where a keyed request is admitted, once its input has been checked.

The wrapper (api.idempotency.wrap) opens a gate for a request that sends an Idempotency-Key; the route
calls `admit_key(body, stream=...)` after it validated the body and built the prompt, right before it
hands the work to the engine. Without a key that is a no-op. With one it records BeginKey:

* STARTED: this request is the first attempt — the route runs it (the wrapper saves its answer);
* FINISHED: raise Replay — the wrapper answers the saved answer (or that it was interrupted);
* RUNNING: the first attempt still runs; wait until it shows which way it goes (a stream: its first
  saved event; a buffered answer: its end), then raise Replay (the wrapper follows or replays it). A
  first attempt refused meanwhile freed the key (KeyEnd.RELEASED): this request starts it instead.

A stored `/v1/responses` passes `bound` (its response id): the answer is that stored response, kept once
(the buffered JSON rendered from it, or the stream's events saved in it), not copied into the key's chunks.

A refusal of the core is an ApiError in the surface's envelope: another body with this key 422, a
journal hold 429 (nothing stored), a full key table or byte budget a 400 (api.stored_http's mapping).
Input that fails validation never reaches admit_key: nothing is recorded for it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Optional

from aotx.stored import BeginKey, KeyLookup, KeyState, Reason, StoredRefusal
from aotx.stored.port import StoredJournal
from api.errors import ApiError
from api.stored_http import refusal_error as stored_refusal_error
from api.idempotency.header import HEADER, body_digest

FOLLOW_WAIT = 30.0     # seconds one wait for the first attempt's progress lasts before looking again
_CODES = {Reason.MISMATCH: "idempotency_key_reused"}


@dataclass(eq=False)
class KeyGate:
    port: StoredJournal
    identity: str
    surface: str
    key: str
    admitted: bool = False            # BeginKey started the key for this request
    digest: bytes = b""
    bound: str = ""                   # the stored response that is the answer ("" = the key's own chunks)
    render: Optional[Callable[[Any], bytes]] = None   # a bound buffered answer from the stored response view
    kept: bool = False                # a bound first attempt: its stored response holds the whole answer

    async def lookup(self) -> KeyLookup:
        found = await self.port.reads.key(self.identity, self.surface, self.key, self.digest)
        if isinstance(found, StoredRefusal):   # a port across the split that was not answered
            raise refusal_error(found)
        return found

    async def wait(self, seen: int) -> None:
        await self.port.wait_key(self.identity, self.surface, self.key, seen, FOLLOW_WAIT)

    async def wait_events(self, response_id: str, seen: int, key_chunks: int = 0) -> None:
        """Until the bound response `response_id` has more than `seen` events or ends, or the key itself
        changes (its end: a first attempt cut or interrupted ends the key, not its response), at most
        FOLLOW_WAIT seconds."""
        waits = [asyncio.ensure_future(self.port.wait_events(self.identity, response_id, seen, FOLLOW_WAIT)),
                 asyncio.ensure_future(self.wait(key_chunks))]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def bound_events(self, response_id: str) -> int:
        """Events saved in the bound stored response (0 when it is gone)."""
        view = await self.port.reads.response(self.identity, response_id)
        return 0 if isinstance(view, StoredRefusal) else view.events


GATE: ContextVar[Optional[KeyGate]] = ContextVar("aotx_idempotency_gate", default=None)


class Replay(Exception):
    """The request is a repeat: answer from the first attempt (raised through the route to the wrapper)."""

    def __init__(self, gate: KeyGate, lookup: KeyLookup) -> None:
        super().__init__(lookup.state.value)
        self.gate, self.lookup = gate, lookup


def refusal_error(refusal: StoredRefusal) -> ApiError:
    """The one mapping of the stored surfaces (api.stored_http: a full table is a 400, never a 5xx; a
    hold 429), about the Idempotency-Key header where the refusal names no other field."""
    if refusal.reason is Reason.MISMATCH:
        return ApiError(422, refusal.message, param=refusal.param or HEADER, code=_CODES[Reason.MISMATCH])
    return stored_refusal_error(replace(refusal, param=refusal.param or HEADER))


async def _first_sign(gate: KeyGate, stream: bool) -> KeyLookup:
    while True:
        found = await gate.lookup()
        if found.state is not KeyState.RUNNING:
            return found
        if stream and found.bound:       # a bound stream's events are saved in its stored response
            seen = await gate.bound_events(found.bound)
            if seen:
                return found
            await gate.wait_events(found.bound, seen, len(found.chunks))
            continue
        if stream and found.chunks:
            return found
        await gate.wait(len(found.chunks))


def bound_gate() -> Optional[KeyGate]:
    """This request's gate when it is a keyed first attempt whose answer is its stored response."""
    gate = GATE.get()
    return gate if gate is not None and gate.admitted and gate.bound else None


async def admit_key(body: dict, *, stream: bool, bound: Optional[str] = None,
                    render: Optional[Callable[[Any], bytes]] = None) -> None:
    """Admit this request under its Idempotency-Key (no-op without one); see the module doc. `bound`: the
    id of the stored response that will be the answer (a stored /v1/responses), `render` its buffered
    answer from the stored response's view."""
    gate = GATE.get()
    if gate is None:
        return
    gate.digest = body_digest(body)
    gate.render = render
    while True:
        out = await gate.port.record(gate.identity, BeginKey(gate.surface, gate.key, gate.digest, bound))
        if isinstance(out, StoredRefusal):
            raise refusal_error(out)
        found = out.key
        gate.bound = found.bound
        if found.state is KeyState.STARTED:
            gate.admitted = True
            return
        if found.state is KeyState.RUNNING:
            found = await _first_sign(gate, stream)
        if found.state is KeyState.ABSENT:       # the first attempt was refused before it ran: run this one
            continue
        if found.state is KeyState.MISMATCH:     # ... and another body took the key since
            raise ApiError(422, "this Idempotency-Key was used with another request body", param=HEADER,
                           code=_CODES[Reason.MISMATCH])
        raise Replay(gate, found)
