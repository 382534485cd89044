"""A stored response that is also a keyed first attempt's answer (Idempotency-Key + `store: true`): saved
once, in the stored response, which the key is bound to (BeginKey.bound; api.idempotency.bound answers
the repeats from it).

* buffered: once FinishResponse is recorded the answer is the stored response rendered
  (`render_stored`, the bytes a repeat renders again); `gate.kept` says the key may finish COMPLETE;
* streamed: every event the client gets is also saved in the stored response (an EventSaver: one append
  in flight, the rest batched), the terminal event included, before FinishResponse; the terminal event
  goes to the client once both are recorded. If an event or the end could not be saved, `gate.kept`
  stays false and the key finishes INTERRUPTED (a repeat is told so, never given a part as if whole).
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

from aotx import strict_json
from aotx.stored import StoredRefusal
from api.idempotency.gate import KeyGate
from api.surfaces.responses.event_saver import EventSaver
from api.surfaces.responses.stored_object import response_object
from api.surfaces.responses.stored_run import StoredRun, terminal_at
from api.surfaces.responses.stream import ResponsesStreamProjector


def render_stored(view) -> bytes:
    """A stored response as the buffered answer's bytes (api.surfaces.route_kit.json_response's)."""
    return strict_json.dumps(response_object(view)).encode("utf-8")


def split_events(chunk: bytes) -> list[bytes]:
    """The SSE events of one write (whole events, each ended by a blank line)."""
    return [part + b"\n\n" for part in chunk.split(b"\n\n") if part]


class BoundRun(StoredRun):
    def __init__(self, plan, ident: dict, gate: KeyGate) -> None:
        super().__init__(plan, ident)
        self.gate = gate

    async def _view(self):
        view = await self.plan.port.reads.response(self.plan.identity, self.response_id)
        return None if isinstance(view, StoredRefusal) else view

    async def buffered(self, handles, ident: dict) -> dict:
        final = await super().buffered(handles, ident)
        view = await self._view() if self.recorded else None
        if view is None or view.finished_at is None:
            return final                              # the key finishes interrupted (gate.kept stays false)
        self.gate.kept = True
        return response_object(view)

    async def _stream(self, events: AsyncIterator[bytes], projector: ResponsesStreamProjector) -> AsyncIterator[bytes]:
        saver = EventSaver(self.plan.port, self.plan.identity, self.response_id)
        held: list[bytes] = []
        try:
            async with aclosing(events) as inner:
                async for chunk in inner:
                    at = terminal_at(chunk) if projector.final is not None and not held else None
                    saver.add(split_events(chunk))
                    if held:
                        held.append(chunk)
                    elif at is None:
                        yield chunk
                    else:   # what precedes the terminal event goes now; the rest once it is all recorded
                        if at:
                            yield chunk[:at]
                        held.append(chunk[at:])
            refusal = await asyncio.shield(saver.close())
            if projector.final is not None:
                await asyncio.shield(self.finish_started(projector.final))
            self.gate.kept = refusal is None and self.recorded and projector.final is not None
            for chunk in held:
                yield chunk
        finally:
            if not self.finished:
                self.finish_soon(self.cut(projector))
