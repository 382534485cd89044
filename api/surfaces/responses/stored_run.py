"""A stored (`store: true`) response's life in the stored state, around its generation.

`begin` records CreateResponse (the input items with ids, instructions, tools, the other echoed fields
as `params`, metadata, previous_response_id, conversation) while the engine is asked, and gives the
handles only once the store has it: no status line and no byte of the answer goes out before (the
engine's first tokens wait in the handles). A hold known at that moment (`on_hold`) answers 429 before
the engine is asked; a create refused otherwise (the hold that very write discovers: 429; limits)
cancels the generation and stores nothing, as a background run does. An engine refusal at admission
deletes the response again (`abandon`) once it landed. `buffered` and `stream` run the generation and record
FinishResponse (output items, usage, status, error) before the client sees the end: the buffered JSON
is answered, and a stream's terminal event is sent, only once the store has the finished response (a
stream starts recording it as soon as the final object exists and sends the events before the terminal
one meanwhile: only the terminal event waits for the journal). A
stream cut by the client (or a buffered request whose client left) is finished `failed` with error code
`client_disconnected` and the output produced so far; an engine failure is finished `failed` with it.

Not stored (`store: false`, or no stored port): every call here is a no-op (`NOT_STORED`).
Resumable streams (issue 11 part 4) plug in at `stream`: the events pass through it one by one.
"""
from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing

from aotx.runtime.input_trace import stamp_response
from aotx.stored import (
    CreateResponse,
    DeleteResponse,
    FinishResponse,
    ResponseStatus,
    Saved,
)
from api.errors import ApiError
from api.runner import cancel_all, collect
from api.stored_http import checked, refusal_error
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.stored_plan import StoredPlan
from api.surfaces.responses.stored_object import stored_params
from api.surfaces.responses.stream import ResponsesStreamProjector

log = logging.getLogger("aotx.stored_responses")
STATUS = {"completed": ResponseStatus.COMPLETED, "incomplete": ResponseStatus.INCOMPLETE,
          "failed": ResponseStatus.FAILED, "cancelled": ResponseStatus.CANCELLED}
DISCONNECTED = {"code": "client_disconnected",
                "message": "The client disconnected before the response finished; it was not completed."}
TERMINAL_EVENTS = tuple(f"event: response.{s}\n".encode() for s in ("completed", "incomplete", "failed"))
_TERMINAL_INSIDE = tuple(b"\n\n" + t for t in TERMINAL_EVENTS)
_PENDING: set[asyncio.Task] = set()   # finishes recorded after their request ended (kept referenced)


def terminal_at(chunk: bytes) -> int | None:
    """Where the terminal event begins in `chunk` (SSE bytes of one or more events), or None."""
    if chunk.startswith(TERMINAL_EVENTS):
        return 0
    found = [i for i in (chunk.find(t) for t in _TERMINAL_INSIDE) if i >= 0]
    return min(found) + 2 if found else None


class StoredRun:
    def __init__(self, plan: StoredPlan, ident: dict) -> None:
        self.plan, self.ident = plan, ident
        self.response_id: str = ident["id"]
        self.finished = False
        self.recorded = False      # FinishResponse was recorded

    def _create(self, base: dict) -> CreateResponse:
        plan = self.plan
        return CreateResponse(self.response_id, base["created_at"], base["model"], plan.input_items,
                              instructions=base.get("instructions"), tools=list(base.get("tools") or ()),
                              params=stored_params(base),
                              metadata=base.get("metadata") or {}, previous_response_id=plan.previous_response_id,
                              conversation=plan.conversation)

    async def begin(self, base: dict, submit: Callable[[], Awaitable[list]]) -> list:
        """Record CreateResponse and ask the engine (`submit`) at once; the handles once the store has the
        response, so that nothing of the answer goes out before it. A hold known now (`on_hold`) refuses
        before the engine is asked; a create refused otherwise (the hold it discovers, a limit) cancels
        the generation and raises the refusal, nothing stored; an engine refusal deletes the response
        again (once it landed) before it is raised."""
        port, identity, cmd = self.plan.port, self.plan.identity, self._create(base)
        if port.on_hold():
            checked(await port.record(identity, cmd))   # 429 (the hold) before anything runs
            return await self._submitted(submit)
        recording = asyncio.ensure_future(port.record(identity, cmd))
        stamp_response(self.response_id, "create_sent")
        try:
            handles = await submit()
            stamp_response(self.response_id, "submitted")
        except ApiError:
            if isinstance(await asyncio.shield(recording), Saved):
                await self.abandon()
            raise
        except BaseException:
            self._close_when_recorded(recording)
            raise
        try:
            out = await asyncio.shield(recording)
        except BaseException:   # the client left while the create was in flight
            cancel_all(handles)
            self._close_when_recorded(recording)
            raise
        if not isinstance(out, Saved):
            cancel_all(handles)
            raise refusal_error(out)
        stamp_response(self.response_id, "create_acked")
        return handles

    async def _submitted(self, submit: Callable[[], Awaitable[list]]) -> list:
        try:
            return await submit()
        except ApiError:
            await self.abandon()
            raise

    def _close_when_recorded(self, recording: asyncio.Future) -> None:
        """The request ended before it was answered: once the create lands, finish the response as failed
        (client_disconnected), as a stream cut by the client is."""
        self.finished = True
        failed = ResponsesStreamProjector(**self.ident).response("failed", error=DISCONNECTED)

        async def close() -> None:
            try:
                out = await recording
            except Exception as exc:   # the request already met this error; the next boot closes it if it landed
                log.warning("the create of response %s failed: %s", self.response_id, exc)
                return
            if isinstance(out, Saved):
                await self._record_finish(failed)
        task = asyncio.get_running_loop().create_task(close())
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)

    async def abandon(self) -> None:
        self.finished = True
        out = await self.plan.port.record(self.plan.identity, DeleteResponse(self.response_id))
        if not isinstance(out, Saved):
            log.warning("could not delete the refused response %s: %s", self.response_id, out)

    async def finish(self, final: dict) -> None:
        """Record the terminal response object `final` (as the projector built it)."""
        if self.finished:
            return
        self.finished = True
        await self._record_finish(final)

    def finish_started(self, final: dict) -> asyncio.Task:
        """`finish` begun now in a task of its own (kept referenced), for the caller to await later."""
        self.finished = True
        task = asyncio.get_running_loop().create_task(self._record_finish(final))
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)
        return task

    async def _record_finish(self, final: dict) -> None:
        stamp_response(self.response_id, "finish_sent")
        status = STATUS[final["status"]]
        cmd = FinishResponse(self.response_id, status, [dict(item) for item in final["output"]],
                             usage=final.get("usage"), error=final.get("error"),
                             incomplete_details=final.get("incomplete_details"),
                             finished_at=final.get("completed_at"))
        out = await asyncio.shield(self.plan.port.record(self.plan.identity, cmd))   # a cancelled caller
        if not isinstance(out, Saved):   # it stays in progress until the next boot closes it as interrupted
            log.warning("could not record the end of response %s: %s", self.response_id, out)
        self.recorded = isinstance(out, Saved)
        stamp_response(self.response_id, "finish_acked")

    def finish_soon(self, final: dict) -> None:
        """`finish` in a task of its own: the request that ran it is gone (cancelled, or dropped)."""
        if self.finished:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            log.warning("response %s was dropped outside the event loop; the next boot closes it", self.response_id)
            return
        task = loop.create_task(self.finish(final))
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)

    def cut(self, projector: ResponsesStreamProjector) -> dict:
        return projector.final or projector.response("failed", error=DISCONNECTED)

    async def buffered(self, handles, ident: dict) -> dict:
        projector_for_cut = ResponsesStreamProjector(**ident)
        try:
            deltas = await collect(handles)
        except ApiError as err:
            await self.finish(projector_for_cut.response(
                "failed", error={"code": "server_error", "message": err.message}))
            raise
        except BaseException:
            self.finish_soon(projector_for_cut.response("failed", error=DISCONNECTED))
            raise
        try:
            final = build_response(deltas[0], **ident)
        except ApiError as err:
            await self.finish(projector_for_cut.response(
                "failed", error={"code": "server_error", "message": err.message}))
            raise
        await self.finish(final)
        return final

    def stream(self, events: AsyncIterator[bytes], projector: ResponsesStreamProjector) -> AsyncIterator[bytes]:
        wrapped = self._stream(events, projector)
        weakref.finalize(wrapped, self.finish_soon, projector.response("failed", error=DISCONNECTED))
        return wrapped

    async def _stream(self, events: AsyncIterator[bytes], projector: ResponsesStreamProjector) -> AsyncIterator[bytes]:
        # FinishResponse is recorded from the moment the projector has the final response object, while the
        # last events (the last delta, output_text.done, output_item.done …) go on to the client; only the
        # terminal event (and anything after it) waits for the store to have the finished response
        finishing: asyncio.Task | None = None
        held: list[bytes] = []
        try:
            async with aclosing(events) as inner:
                async for chunk in inner:
                    if finishing is None and projector.final is not None:
                        finishing = self.finish_started(projector.final)
                    at = terminal_at(chunk) if finishing is not None and not held else None
                    if held:
                        held.append(chunk)
                    elif at is None:
                        yield chunk
                    else:   # one write may carry a step's events: what precedes the terminal one goes now
                        if at:
                            yield chunk[:at]
                        held.append(chunk[at:])
            if finishing is None and projector.final is not None:
                finishing = self.finish_started(projector.final)
            if finishing is not None:
                await asyncio.shield(finishing)   # a client that leaves now does not cancel the record
            for chunk in held:
                yield chunk
        finally:
            if not self.finished:
                self.finish_soon(self.cut(projector))


class _NotStored:
    finished = True

    async def begin(self, base: dict, submit: Callable[[], Awaitable[list]]) -> list:
        handles = await submit()
        stamp_response(base["id"], "submitted")   # the bench's store:false stages (a no-op unless traced)
        return handles

    async def buffered(self, handles, ident: dict) -> dict:
        return build_response((await collect(handles))[0], **ident)

    def stream(self, events: AsyncIterator[bytes], projector) -> AsyncIterator[bytes]:
        return events


NOT_STORED = _NotStored()


def run_for(plan: StoredPlan, ident: dict):
    return StoredRun(plan, ident) if plan.store else NOT_STORED
