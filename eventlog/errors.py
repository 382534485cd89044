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
# atomic batch publish (ADR-50, nats-server ≥ 2.12): a batch is refused whole, nothing of it stored
ERR_WRONG_LAST_SEQUENCE_CONSTANT = 10164   # a second guard on one subject, or the subject is in process
ERR_ATOMIC_DISABLED = 10174                # the stream was not created (or updated) with allow_atomic
ERR_BATCH_INCOMPLETE = 10176               # a gap in the batch's sequence (a message lost on the way)
ERR_BATCH_TOO_LARGE = 10199                # over the server's messages per batch (1000 by default)
ERR_BATCH_DUPLICATE_MSG_ID = 10201         # a message id of the batch is already in the duplicate window
ERR_BATCH_TOO_MANY_INFLIGHT = 10210        # over the batches in flight per stream or per server

_FULL_MARKERS = ("maximum bytes", "maximum messages", "resource limits exceeded")


class EventLogError(Exception):
    """Base of every error the event log raises."""


class ConcurrencyConflict(EventLogError):
    """The subject's last sequence was not the one the writer expected. `subject` is None where the
    log does not say which (a JetStream batch is refused whole, naming no subject)."""

    def __init__(self, subject: str | None, expected: int | None, detail: str) -> None:
        where = "a batch" if subject is None else repr(subject)
        super().__init__(f"concurrency conflict on {where}: expected last sequence {expected}; {detail}")
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


class BatchTooLarge(EventLogError):
    """An atomic batch holds more messages than the log takes in one batch (nothing stored)."""


class DuplicateInBatch(EventLogError):
    """An atomic batch holds a message id already in the duplicate window, or twice (nothing stored):
    unlike a single append, a batch is never answered as a duplicate."""


class AtomicBatchUnsupported(EventLogError):
    """The stream does not take atomic batches (created without allow_atomic, or an older server)."""


def map_publish_error(exc: BaseException, subject: str | None, expected: int | None) -> EventLogError | None:
    """Translate a nats.py error raised by a publish into ours; None if it is not one we know."""
    if isinstance(exc, nats.js.errors.APIError):
        code = exc.err_code
        text = exc.description or ""
        described = f"err_code={code} description={text!r}"
        if code in (ERR_WRONG_LAST_SEQUENCE, ERR_WRONG_LAST_SEQUENCE_CONSTANT):
            return ConcurrencyConflict(subject, expected, described)
        if code == ERR_ATOMIC_DISABLED:
            return AtomicBatchUnsupported(described)
        if code == ERR_BATCH_TOO_LARGE:
            return BatchTooLarge(described)
        if code == ERR_BATCH_DUPLICATE_MSG_ID:
            return DuplicateInBatch(described)
        if code in (ERR_BATCH_INCOMPLETE, ERR_BATCH_TOO_MANY_INFLIGHT):
            return JournalUnavailable(f"journal unavailable: {described}", err_code=code)
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
