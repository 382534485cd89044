"""Tie request handles to projectors and builders; every path cancels its handles.

A projector is any object with `open() -> list[ServerSentEvent]`,
`feed(choice, delta) -> list[ServerSentEvent]`, `fail(message) -> list[...]`
and a `done` flag (set once its terminal event has been produced); optionally
`plain_bytes(choice, delta) -> bytes | None`: a plain token's bytes as `feed`'s
events would encode them, or None (nothing done) where the delta needs `feed`.
"""
from __future__ import annotations

import asyncio
import logging
import weakref
from typing import AsyncIterator, Sequence

from aotx.engine.request import DeltaStream
from aotx.engine.types import Delta, SamplingParams
from api.errors import ApiError, rejection_error

log = logging.getLogger("aotx.runner")
_END = object()
_PROMPT_PARAM = {"completions": "prompt", "responses": "input"}   # else "messages"


async def submit_all(service, prompts: Sequence[list[int]], params: Sequence[SamplingParams], *,
                     surface: str, lane: str) -> list:
    """Submit one request per (prompt, params); on a refusal cancel those already taken. A service with
    `submit_batch` (an HTTP worker's aotx.serving_remote.RemoteModelService) submits them all at once."""
    from aotx.engine import RequestRejected  # the engine package owns the exception

    handles = []
    try:
        batch = getattr(service, "submit_batch", None)
        if batch is not None:
            return await batch(prompts, params, surface=surface, lane=lane)
        for prompt_ids, p in zip(prompts, params):
            handles.append(service.submit(prompt_ids, p, surface=surface, lane=lane))
    except RequestRejected as exc:
        cancel_all(handles)
        raise rejection_error(getattr(exc, "code", ""),
                              getattr(exc, "message", None) or str(exc),
                              _PROMPT_PARAM.get(surface, "messages")) from None
    except BaseException:
        cancel_all(handles)
        raise
    return handles


def _ids(handles) -> list:
    return [getattr(h, "request_id", None) for h in handles]


def cancel_all(handles) -> None:
    """Cancel every handle (a no-op for a finished one). It runs in `finally` blocks and finalizers, so one
    that raises is logged and the others are still cancelled."""
    for handle in handles:
        try:
            handle.cancel()
        except Exception:
            log.exception("could not cancel a request", extra={"fields": {"request_id": _ids([handle])[0]}})


async def merge(handles) -> AsyncIterator[tuple[int, Delta]]:
    """Deltas of several handles as they arrive, tagged with the handle's index.
    An exception raised by a handle's iteration is re-raised here."""
    async for batch in merge_batches(handles):
        for item in batch:
            yield item


def merge_batches(handles) -> AsyncIterator[list[tuple[int, Delta]]]:
    """Like `merge`, but everything already waiting at once: one list per wake-up (every delta of
    one engine step, and whatever piled up while the consumer was busy). One engine handle is read
    in place (_one_batches itself: no generator of ours around it)."""
    if len(handles) == 1 and isinstance(handles[0], DeltaStream):
        return _one_batches(handles[0])
    return _many_batches(handles)


async def _many_batches(handles) -> AsyncIterator[list[tuple[int, Delta]]]:
    """merge_batches of several handles: a pump task a handle into one queue."""
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(i: int, handle) -> None:
        try:
            async for delta in handle:
                await queue.put((i, delta))
        except Exception as exc:  # forwarded to the consumer
            await queue.put((i, exc))
        finally:
            await queue.put((i, _END))

    tasks = [asyncio.ensure_future(pump(i, h)) for i, h in enumerate(handles)]
    live = len(tasks)
    try:
        while live:
            items = [await queue.get()]
            while not queue.empty():
                items.append(queue.get_nowait())
            batch = []
            for i, item in items:
                if item is _END:
                    live -= 1
                elif isinstance(item, Exception):
                    if batch:
                        yield batch
                    raise item
                else:
                    batch.append((i, item))
            if batch:
                yield batch
    finally:
        for task in tasks:
            task.cancel()


async def _one_batches(handle: DeltaStream) -> AsyncIterator[list[tuple[int, Delta]]]:
    """merge_batches of a single engine handle, read in place: no pump task, no second queue, so a
    token costs one wake-up of the consumer instead of three (handle -> pump -> queue -> consumer).
    Its next_batch, unrolled: the first delta is the one the handle hands to its waiting reader (no
    coroutine of the handle's a wake-up), the rest of the step's are in its box by then (`waiting`)."""
    while True:
        try:
            first = await handle.__anext__()
        except StopAsyncIteration:
            return
        yield [(0, first), *[(0, d) for d in handle.waiting()]]


def stream_events(handles, projector) -> AsyncIterator[bytes]:
    """The SSE byte stream of a projector fed from `handles`.

    On a client disconnect Quart cancels the generator and its `finally` cancels
    every handle. A client that leaves before the body is ever iterated leaves a
    generator that never started (no `finally` runs): the finalizer cancels the
    handles when that generator is dropped.
    """
    events = _stream_events(handles, projector)
    weakref.finalize(events, cancel_all, list(handles))
    return events


async def _stream_events(handles, projector) -> AsyncIterator[bytes]:
    try:
        for event in projector.open():
            yield event.encode()
        plain = getattr(projector, "plain_bytes", None)   # a plain token's bytes without events, or None
        try:
            async for batch in merge_batches(handles):
                out = []
                for i, delta in batch:
                    if plain is not None:
                        data = plain(i, delta)
                        if data is not None:
                            if data:
                                out.append(data)
                            continue
                    out += [event.encode() for event in projector.feed(i, delta)]
                    if projector.done:
                        break
                if out:
                    yield b"".join(out)   # one write for what was waiting: one step's chunks
                if projector.done:
                    break
            else_events = [] if projector.done else projector.fail("generation ended early")
        except Exception as exc:  # the engine raised after the stream started: the stream ends with an error
            log.exception("generation failed mid-stream", extra={"fields": {"request_ids": _ids(handles)}})
            else_events = projector.fail(f"generation failed: {exc}")
        for event in else_events:
            yield event.encode()
    finally:
        cancel_all(handles)


async def collect(handles) -> list[list[Delta]]:
    """Every delta of every handle (buffered requests). Cancelled with the request."""
    out: list[list[Delta]] = [[] for _ in handles]
    try:
        async for i, delta in merge(handles):
            out[i].append(delta)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the engine raised: a 500 in the surface's envelope
        log.exception("generation failed", extra={"fields": {"request_ids": _ids(handles)}})
        raise ApiError(500, f"Generation failed: {exc}") from None
    finally:
        cancel_all(handles)
    return out
