"""Waiting on a condition, never on the clock: the one way tests wait for something to have happened.

`wait_until(check, what)` calls `check()` until `done(answer)` holds (default: the answer is truthy)
and returns that answer; past `timeout` seconds it fails with an AssertionError naming `what` and the
last answer seen. `wait_until_async` is the same for async tests; its `check` may be a coroutine
function. The interval between calls is short; the deadline only bounds a test that would otherwise
hang, it never stands for "by now it has happened" (CI is a slow, busy 2-core box).

`open_stream` opens an SSE route through a Quart test client without reading it to its end, so a test
can wait for the response to start (or for some events) before it changes what the stream shows.
"""
from __future__ import annotations

import asyncio
import inspect
import os
import time
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")
DEFAULT_TIMEOUT = 120.0   # seconds: long enough for the real model on a busy box; only a hung test reaches it
INTERVAL = 0.05


class _Timeout(AssertionError):
    pass


def _failure(what: str, timeout: float, last: Any) -> AssertionError:
    shown = repr(last)
    if len(shown) > 2000:
        shown = shown[:2000] + "…"
    return _Timeout(f"timed out after {timeout:g} s waiting for {what}; last seen: {shown}")


def wait_until(check: Callable[[], T], what: str, *, timeout: float = DEFAULT_TIMEOUT,
               done: Callable[[T], Any] = bool, interval: float = INTERVAL) -> T:
    """`check()` until `done(answer)`; the answer. An AssertionError naming `what` past `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if done(answer):
            return answer
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, answer)
        time.sleep(interval)


async def wait_until_async(check: Callable[[], T | Awaitable[T]], what: str, *, timeout: float = DEFAULT_TIMEOUT,
                           done: Callable[[T], Any] = bool, interval: float = INTERVAL) -> T:
    """`check()` (awaited when it answers an awaitable) until `done(answer)`; the answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if done(answer):
            return answer
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, answer)
        await asyncio.sleep(interval)


class OpenStream:
    """A response read as it comes (Quart test client): `status_code` once the response started, `text`
    so far; `finish()` waits for the app to end the response and answers its whole body."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.data = bytearray()
        self._reader: asyncio.Task | None = None
        self._finished = False

    @property
    def status_code(self) -> int | None:
        return self.connection.status_code

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    async def started(self, what: str = "the response to start", timeout: float = DEFAULT_TIMEOUT) -> int:
        return await wait_until_async(lambda: self.status_code, what, timeout=timeout)

    async def _read(self) -> None:
        while True:
            self.data += await self.connection.receive()

    async def __aenter__(self) -> "OpenStream":
        await self.connection.__aenter__()
        await self.connection.send_complete()
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def finish(self, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The whole body, once the app has ended the response (a deadline, not a pause)."""
        await self._stop_reading()
        try:
            await asyncio.wait_for(self.connection.__aexit__(None, None, None), timeout)
        except asyncio.TimeoutError:
            raise _failure("the stream to end", timeout, self.text) from None
        self._finished = True
        self.data += self.connection.response_data
        return self.text

    async def _stop_reading(self) -> None:
        if self._reader is not None:
            self._reader.cancel()   # a Queue.get cancelled loses nothing: the rest is drained at the end
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if not self._finished:   # left before the end: the client goes away
            await self._stop_reading()
            await self.connection.disconnect()
            await self.connection.__aexit__(None, None, None)


def open_stream(client: Any, path: str, headers: dict[str, str] | None = None) -> OpenStream:
    """`async with open_stream(test_client, path, headers) as s: await s.started(); …; body = await s.finish()`."""
    return OpenStream(client.request(path, method="GET", headers=headers or {}))


def process_gone(pid: int) -> bool:
    """Whether no process has this pid any more (for wait_until)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
