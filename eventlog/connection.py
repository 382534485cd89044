"""Bounded close and quiet reconnect logging for nats-py connections.

A connection that reconnects forever (`max_reconnect_attempts=-1`) calls its `error_cb` on every
failed attempt: with `reconnect_time_wait=0.2` that is five log lines a second for as long as
nats-server is away. `OutageLog.error` is an `error_cb` that logs the first failure of an outage once,
with the connection's name and server, then one summary line a minute while it lasts, and one
line when the connection works again.

`close_connection` closes within a bound whatever the server does: nats-py's close flushes what
is pending (a ConnectionResetError when the server is gone) and cancels its reconnect loop, and
that loop can swallow a cancellation (its connect attempt runs under `asyncio.wait_for`, which on
Python 3.11 drops a cancel that lands as the attempt fails; the loop then catches the connect
error and tries again forever, and `asyncio.run` waits on it at exit). So the client's own tasks
are cancelled until they are done, up to the deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time

import nats.errors
from nats.aio.client import Client

from .connect import redact_url

CLOSE_TIMEOUT = 2.0          # seconds a close (or a drain) may take before it is abandoned
SUMMARY_INTERVAL = 60.0      # seconds between "still reconnecting" lines of one outage
_CLIENT_TASKS = ("_reconnection_task", "_reading_task", "_flusher_task", "_ping_interval_task")
_log = logging.getLogger("eventlog.connection")
# errors that mean "the server cannot be reached": they begin (or continue) an outage
_OUTAGE = (OSError, asyncio.TimeoutError, nats.errors.UnexpectedEOF, nats.errors.StaleConnectionError,
           nats.errors.ConnectionClosedError, nats.errors.NoServersError)
# a server that accepted the connection and closed it before its INFO (it was stopping): nats-py raises
# the plain Error class with this text, so it is told by the text
_NO_INFO = "empty response from server when expecting INFO"


def is_outage(exc: BaseException) -> bool:
    """Does this error mean the server cannot be reached (now)?"""
    return isinstance(exc, _OUTAGE) or (type(exc) is nats.errors.Error and _NO_INFO in str(exc))


class OutageLog:
    """`error` and `reconnected` are nats.connect's error_cb and reconnected_cb: a line per outage."""

    def __init__(self, logger: logging.Logger, name: str, url: str, *, level: int = logging.WARNING,
                 summary_interval: float = SUMMARY_INTERVAL) -> None:
        self.logger, self.name, self.url, self.level = logger, name, redact_url(url or ""), level   # never a password
        self.summary_interval = summary_interval
        self.failures = 0                    # errors seen in the current outage
        self._since: float | None = None     # monotonic time the current outage began
        self._summary_at = 0.0

    @property
    def in_outage(self) -> bool:
        return self._since is not None

    async def error(self, exc: Exception) -> None:
        if not is_outage(exc):   # not about reaching the server: every one is worth a line
            self.logger.log(self.level, "nats connection %s to %s: %s: %s", self.name, self.url,
                            type(exc).__name__, exc)
            return
        now = time.monotonic()
        self.failures += 1
        if self._since is None:
            self._since, self._summary_at = now, now + self.summary_interval
            self.logger.log(self.level, "nats connection %s to %s: %s: %s; reconnecting (further failures of this "
                            "outage are logged at debug level)",
                            self.name, self.url, type(exc).__name__, exc)
        elif now >= self._summary_at:
            self._summary_at = now + self.summary_interval
            self.logger.log(self.level, "nats connection %s to %s: still reconnecting after %.0f s "
                            "(%d failures; last %s: %s)", self.name, self.url, now - self._since,
                            self.failures, type(exc).__name__, exc)
        else:
            self.logger.debug("nats connection %s: %s: %s", self.name, type(exc).__name__, exc)

    async def reconnected(self) -> None:
        if self._since is not None:
            self.logger.log(self.level, "nats connection %s to %s: reconnected after %.1f s (%d failures)",
                            self.name, self.url, time.monotonic() - self._since, self.failures)
        self._since, self.failures = None, 0


async def _finish_client_tasks(nc: Client, deadline: float) -> bool:
    """Cancel the client's background tasks until each is done (or the deadline passes)."""
    tasks = [t for t in (getattr(nc, attr, None) for attr in _CLIENT_TASKS)
             if isinstance(t, asyncio.Task) and t is not asyncio.current_task()]
    for task in tasks:
        while not task.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            task.cancel()
            await asyncio.wait({task}, timeout=min(0.1, left))
    return True


def _closed_transport(exc: RuntimeError) -> bool:
    """uvloop's refusal to write to a transport closed already (asyncio's own loop drops such a write):
    nats-py's final flush to a server that is gone, on the serving commands' loop (api.server.run_serving)."""
    return "handler is closed" in str(exc)


async def close_connection(nc: Client | None, *, timeout: float = CLOSE_TIMEOUT, name: str = "") -> None:
    """Close `nc` within `timeout` seconds, never raising for a server that is gone."""
    if nc is None:
        return
    deadline = time.monotonic() + timeout
    if not nc.is_closed:
        try:
            await asyncio.wait_for(nc.close(), timeout)
        except asyncio.TimeoutError:
            _log.warning("nats connection %s: close did not finish within %.1f s; abandoned", name, timeout)
        except (OSError, nats.errors.Error) as exc:   # the final flush to a server that is gone
            _log.debug("nats connection %s: close: %s: %s", name, type(exc).__name__, exc)
        except RuntimeError as exc:
            if not _closed_transport(exc):
                raise
            _log.debug("nats connection %s: close: the transport was closed already: %s", name, exc)
    if not await _finish_client_tasks(nc, deadline + 0.5):
        _log.warning("nats connection %s: a background task of the client did not end at close", name)


async def drain_connection(nc: Client | None, *, timeout: float = CLOSE_TIMEOUT, name: str = "") -> None:
    """Drain `nc` (subscriptions finish what they hold) within `timeout`; else close it."""
    if nc is None or nc.is_closed:
        await close_connection(nc, timeout=timeout, name=name)
        return
    try:
        await asyncio.wait_for(nc.drain(), timeout)
    except asyncio.TimeoutError:
        _log.warning("nats connection %s: drain did not finish within %.1f s; closing", name, timeout)
    except (OSError, nats.errors.Error) as exc:   # reconnecting, or the server is gone
        _log.debug("nats connection %s: drain: %s: %s", name, type(exc).__name__, exc)
    except RuntimeError as exc:
        if not _closed_transport(exc):
            raise
        _log.debug("nats connection %s: drain: the transport was closed already: %s", name, exc)
    await close_connection(nc, timeout=timeout, name=name)
