"""Our log exceptions, and the one place where server errors map onto them."""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors

# JetStream API error codes we act on (nats-server/server/errors.json).
ERR_WRONG_LAST_SEQUENCE = 10071
ERR_STORE_FAILED = 10077
ERR_INSUFFICIENT_RESOURCES = 10023
ERR_STORAGE_RESOURCES_EXCEEDED = 10047
ERR_MESSAGE_TOO_LARGE = 10054
ERR_JETSTREAM_NOT_ENABLED = 10076

_FULL_MARKERS = ("maximum bytes", "maximum messages", "resource limits exceeded")


class EventLogError(Exception):
    """Base of every error the event log raises."""


class ConcurrencyConflict(EventLogError):
    """The subject's last sequence was not the one the writer expected."""

    def __init__(self, subject: str, expected: int | None, detail: str) -> None:
        super().__init__(f"concurrency conflict on {subject!r}: expected last sequence {expected}; {detail}")
        self.subject = subject
        self.expected = expected
        self.detail = detail


class JournalHold(EventLogError):
    """The log cannot take new writes now; reads keep working. Lifts by itself."""

    def __init__(self, message: str, *, err_code: int | None = None) -> None:
        super().__init__(message)
        self.err_code = err_code


class JournalFull(JournalHold):
    """The stream reached its byte (or message) cap with discard=new."""


class JournalUnavailable(JournalHold):
    """The server or its disk failed the write (storage error, no responders, timeout)."""


class MessageTooLarge(EventLogError):
    """The payload exceeds the server's maximum message size."""


def map_publish_error(exc: BaseException, subject: str, expected: int | None) -> EventLogError | None:
    """Translate a nats.py error raised by a publish into ours; None if it is not one we know."""
    if isinstance(exc, nats.js.errors.APIError):
        code = exc.err_code
        text = exc.description or ""
        described = f"err_code={code} description={text!r}"
        if code == ERR_WRONG_LAST_SEQUENCE:
            return ConcurrencyConflict(subject, expected, described)
        if code == ERR_MESSAGE_TOO_LARGE:
            return MessageTooLarge(described)
        if any(marker in text.lower() for marker in _FULL_MARKERS):
            return JournalFull(f"journal full: {described}", err_code=code)
        if code in (ERR_STORAGE_RESOURCES_EXCEEDED, ERR_INSUFFICIENT_RESOURCES):
            return JournalFull(f"journal storage exhausted: {described}", err_code=code)
        if code in (ERR_STORE_FAILED, ERR_JETSTREAM_NOT_ENABLED) or isinstance(
            exc, (nats.js.errors.ServiceUnavailableError, nats.js.errors.ServerError)
        ):
            return JournalUnavailable(f"journal unavailable: {described}", err_code=code)
        return None
    if isinstance(exc, (nats.js.errors.NoStreamResponseError, nats.errors.NoRespondersError)):
        return JournalUnavailable("journal unavailable: no stream answered the publish")
    if isinstance(exc, (nats.errors.TimeoutError, asyncio.TimeoutError)):
        return JournalUnavailable("journal unavailable: publish timed out waiting for the ack")
    if isinstance(exc, (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError)):
        return JournalUnavailable(f"journal unavailable: connection {type(exc).__name__}")
    return None
