"""Answers of a key bound to a stored response (a keyed `/v1/responses` with `store: true`): the stored
response is the one saved copy of the answer, so a repeat reads it there.

* finished, buffered: the JSON the route renders from the stored response (`gate.render`, the very bytes
  the first attempt answered, since it answered that rendering too);
* finished, streamed: the stream events saved in the stored response, one by one;
* running, streamed: its saved events, then each new one as it is saved (wait_events), until the key
  finishes; an INTERRUPTED end is sent as the surface's mid-stream error (api.idempotency.cut).

A bound response that is gone (deleted, or past its retention) leaves nothing to answer with: 409
`idempotency_key_answer_deleted` naming the header — the key is never run again nor answered otherwise.
"""
from __future__ import annotations

from collections.abc import AsyncIterator

from aotx.stored import KeyEnd, KeyState, StoredRefusal
from api.errors import ApiError
from api.idempotency.cut import cut_event, interrupted
from api.idempotency.gate import KeyGate
from api.idempotency.header import HEADER


def answer_deleted(response_id: str) -> ApiError:
    return ApiError(409, f"The answer to the first request with this {HEADER} was the stored response "
                         f"'{response_id}', which has been deleted or has expired; it is not run again. Send the "
                         f"request with a new {HEADER} to run it.", param=HEADER, code="idempotency_key_answer_deleted")


async def bound_answer(gate: KeyGate, response_id: str, stream: bool):
    """The body of a finished bound answer: bytes, or an async iterator of the saved events."""
    reads = gate.port.reads
    if stream:
        saved = await reads.response_events(gate.identity, response_id)
        if isinstance(saved, StoredRefusal):
            raise answer_deleted(response_id)
        return _each(gate, response_id, saved)
    view = await reads.response(gate.identity, response_id)
    if isinstance(view, StoredRefusal) or gate.render is None:
        raise answer_deleted(response_id)
    return gate.render(view)


async def _each(gate: KeyGate, response_id: str, saved) -> AsyncIterator[bytes]:
    """The saved events, page after page where a port across the split answers them in parts
    (aotx.runtime.stored_rpc: `finished` only on the last)."""
    while True:
        for _, data in saved.events:
            yield data
        if saved.finished or not saved.events:
            return
        saved = await gate.port.reads.response_events(gate.identity, response_id, saved.events[-1][0])
        if isinstance(saved, StoredRefusal):   # deleted meanwhile: nothing more to send
            return


async def follow_bound(gate: KeyGate, response_id: str) -> AsyncIterator[bytes]:
    """A running bound stream: its saved events, then the new ones, until the key finishes."""
    reads, sent = gate.port.reads, 0
    while True:
        key = await gate.lookup()                         # looked at first: every event saved before it is read next
        saved = await reads.response_events(gate.identity, response_id, None if sent == 0 else sent - 1)
        done = isinstance(saved, StoredRefusal) or saved.finished
        if not isinstance(saved, StoredRefusal):
            for _, data in saved.events:
                yield data
            sent = saved.next
        if key.state is not KeyState.RUNNING:
            if not done and saved.events:            # a part of the saved events (a port across the split)
                continue
            if key.state is KeyState.FINISHED and key.end is not KeyEnd.COMPLETE:
                yield cut_event(gate.surface, interrupted(), sent)
            return
        if done:                                     # the response holds its end: wait for the key's
            await gate.wait(len(key.chunks))
        else:
            await gate.wait_events(response_id, sent, len(key.chunks))
