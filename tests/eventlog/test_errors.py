"""Server errors map onto our exceptions in one place."""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors as jse

from eventlog import (
    ConcurrencyConflict, Header, JournalFull, JournalHold, JournalUnavailable, MessageTooLarge,
    map_publish_error,
)


def _api(cls, code, description, http=400):
    return cls(code=http, err_code=code, description=description)


def test_wrong_last_sequence_is_a_conflict():
    err = map_publish_error(_api(jse.BadRequestError, 10071, "wrong last sequence: 17"), "aotx.j.a.t", 3)
    assert isinstance(err, ConcurrencyConflict)
    assert (err.subject, err.expected) == ("aotx.j.a.t", 3) and "10071" in str(err)


def test_max_bytes_is_full_and_a_hold():
    err = map_publish_error(_api(jse.ServiceUnavailableError, 10077, "maximum bytes exceeded", 503), "s", None)
    assert isinstance(err, JournalFull) and isinstance(err, JournalHold) and err.err_code == 10077
    err = map_publish_error(_api(jse.ServiceUnavailableError, 10047, "insufficient storage", 503), "s", None)
    assert isinstance(err, JournalFull)


def test_disk_and_transport_errors_are_unavailable():
    err = map_publish_error(_api(jse.ServiceUnavailableError, 10077, "write /x: input/output error", 503), "s", None)
    assert isinstance(err, JournalUnavailable) and not isinstance(err, JournalFull)
    for exc in (jse.NoStreamResponseError(), nats.errors.NoRespondersError(), nats.errors.TimeoutError(),
                asyncio.TimeoutError(), nats.errors.ConnectionClosedError()):
        assert isinstance(map_publish_error(exc, "s", None), JournalUnavailable)


def test_too_large_and_unknown():
    assert isinstance(map_publish_error(_api(jse.BadRequestError, 10054, "message size exceeds maximum"), "s", None),
                      MessageTooLarge)
    assert map_publish_error(_api(jse.BadRequestError, 10999, "something else"), "s", None) is None
    assert map_publish_error(ValueError("x"), "s", None) is None


def test_header_names():
    assert Header.MSG_ID.value == "Nats-Msg-Id"
    assert Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value == "Nats-Expected-Last-Subject-Sequence"


def test_atomic_batch_refusals():
    from eventlog import AtomicBatchUnsupported, BatchTooLarge, DuplicateInBatch
    err = map_publish_error(_api(jse.BadRequestError, 10164, "wrong last sequence"), None, None)
    assert isinstance(err, ConcurrencyConflict) and err.subject is None and "a batch" in str(err)
    assert isinstance(map_publish_error(_api(jse.BadRequestError, 10174, "atomic publish is disabled"), None, None),
                      AtomicBatchUnsupported)
    assert isinstance(map_publish_error(_api(jse.BadRequestError, 10199, "atomic publish batch is too large: 1000"),
                                        None, None), BatchTooLarge)
    assert isinstance(map_publish_error(_api(jse.BadRequestError, 10201, "atomic publish batch contains duplicate "
                                                                         "message id"), None, None), DuplicateInBatch)
    for code in (10176, 10210):
        assert isinstance(map_publish_error(_api(jse.BadRequestError, code, "x"), None, None), JournalUnavailable)
    assert Header.BATCH_SEQUENCE.value == "Nats-Batch-Sequence" and Header.BATCH_COMMIT.value == "Nats-Batch-Commit"
