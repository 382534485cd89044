"""`@idempotent(surface)`: Idempotency-Key on a model surface's POST route (one piece for all four).

Without the header the route runs as it always did. With one (malformed: 400; an app with no stored
port: 400, it keeps nothing) the route runs in a task of its own with a key gate open (api.idempotency
.gate): the route calls `admit_key` once its input is checked. The first attempt's answer is saved as
it is produced (api.idempotency.saver) and goes on being produced and saved when its client goes
away — a retry after a dropped connection finds it whole (or follows it). Its client gets a buffered
answer once it is saved, a stream live as it is produced. A stored /v1/responses answer is bound to its
stored response (api.idempotency.gate): nothing is copied into the key, which finishes COMPLETE only
when the route marked the response as holding the whole answer (`gate.kept`). A repeat is answered by
api.idempotency.replay. An error the route raises before its answer began (validation, context length,
a full queue, an engine failure) is answered as usual and saves nothing: a key admitted for it is
released (KeyEnd.RELEASED), so a retry runs again.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Awaitable, Callable, Optional

from quart import Response

from api.errors import ApiError
from api.idempotency.gate import GATE, KeyGate, Replay
from api.idempotency.header import HEADER, presented_key
from api.idempotency.replay import SSE, answer, replay
from api.idempotency.saver import AnswerSaver
from api.stored_access import caller_identity, stored_port

log = logging.getLogger("aotx.idempotency")
KEPT_HEADERS = ("Content-Type", "Cache-Control", "X-Accel-Buffering")   # what a replay answers again
_RUNNING: set[asyncio.Task] = set()    # first attempts, kept until they end (their clients may be gone)


def _ended(task: asyncio.Task) -> None:
    _RUNNING.discard(task)
    if task.cancelled():
        return
    exc = task.exception()        # retrieved here: a client that went away never reads it
    if exc is not None and not isinstance(exc, (ApiError, Replay)):
        log.error("keyed request failed", exc_info=exc)


class FirstAttempt:
    """One keyed request's run: the route, then its answer's body, saved chunk by chunk."""

    def __init__(self, gate: KeyGate) -> None:
        self.gate = gate
        self.head: asyncio.Future = asyncio.get_running_loop().create_future()   # (status, headers)
        self.chunks: list[bytes] = []
        self.done = False
        self._wake = asyncio.Event()

    def _pulse(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    async def run(self, view: Callable[..., Awaitable[Any]], args: tuple, kwargs: dict) -> None:
        gate = self.gate
        saver = AnswerSaver(gate.port, gate.identity, gate.surface, gate.key)
        try:
            response = await view(*args, **kwargs)
        except (Replay, asyncio.CancelledError):
            raise
        except BaseException as exc:
            if gate.admitted:
                await saver.release(exc.status if isinstance(exc, ApiError) else 500)
            raise
        if not gate.admitted or not isinstance(response, Response):
            raise RuntimeError(f"route {getattr(view, '__name__', view)!r} answered a keyed request without "
                               "admit_key (or not with a Response)")
        headers = {name: response.headers[name] for name in KEPT_HEADERS if name in response.headers}
        self.head.set_result((response.status_code, headers))
        try:
            async with response.response as body:
                async for chunk in body:
                    data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
                    self.chunks.append(data)
                    if not gate.bound:        # a bound answer is kept in its stored response
                        saver.add(data)
                    self._pulse()
        except asyncio.CancelledError:   # shutting down: the next boot finishes the key interrupted
            raise
        except BaseException:
            log.exception("keyed answer failed mid-way; its key ends interrupted")
            await saver.interrupt()
            raise
        finally:
            self.done = True
            self._pulse()
        if gate.bound and not gate.kept:   # its stored response does not hold the whole answer
            await saver.interrupt()
            return
        await saver.finish(response.status_code, headers)

    async def live(self) -> Any:
        """The first client's stream: the chunks as they are produced (not waiting for their save)."""
        seen = 0
        while True:
            wake = self._wake
            while seen < len(self.chunks):
                yield self.chunks[seen]
                seen += 1
            if self.done:
                return
            await wake.wait()

    async def answer(self, task: asyncio.Task) -> Response:
        await asyncio.wait({task, self.head}, return_when=asyncio.FIRST_COMPLETED)
        if not self.head.done():
            exc = task.exception()
            if isinstance(exc, Replay):
                return await replay(exc)
            raise exc if exc is not None else RuntimeError("keyed request ended without an answer")
        status, headers = self.head.result()
        if headers.get("Content-Type", "").startswith(SSE):
            return answer(status, headers, self.live())
        await asyncio.wait({task})       # the whole answer produced and saved (or its saving given up)
        if task.exception() is not None:
            raise task.exception()
        return answer(status, headers, b"".join(self.chunks))


def _gate(surface: str) -> Optional[KeyGate]:
    key = presented_key()
    if key is None:
        return None
    port = stored_port()
    if port is None:
        raise ApiError(400, f"'{HEADER}' needs stored state, and this gateway has none (run `aotx serve`); "
                            "send the request without it", param=HEADER, code="idempotency_unavailable")
    return KeyGate(port, caller_identity(), surface, key)


def idempotent(surface: str) -> Callable:
    """Decorate a surface's POST view (below its route decorator); `surface` names the key's scope."""
    def decorate(view: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(view)
        async def keyed(*args: Any, **kwargs: Any) -> Any:
            gate = _gate(surface)
            if gate is None:
                return await view(*args, **kwargs)
            first = FirstAttempt(gate)
            token = GATE.set(gate)
            try:   # the task copies this context: the request, and the gate
                task = asyncio.get_running_loop().create_task(first.run(view, args, kwargs))
            finally:
                GATE.reset(token)
            _RUNNING.add(task)
            task.add_done_callback(_ended)
            return await first.answer(task)
        return keyed
    return decorate
