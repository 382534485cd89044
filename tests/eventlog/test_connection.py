"""eventlog.connection against a real nats-server that goes away: an outage is one log line, not one
per reconnect attempt; closing a connection whose server is gone is bounded, raises nothing and
leaves no task of the client running."""

from __future__ import annotations

import asyncio
import logging
import time

import nats
import uvloop

from eventlog import EmbeddedNats, OutageLog, close_connection, drain_connection
from tests.waiting import wait_until_async

LOGGER = "tests.eventlog.outage"


async def _until(condition, what: str) -> None:
    await wait_until_async(condition, what)


def _client_tasks(nc) -> list[asyncio.Task]:
    names = ("_reconnection_task", "_reading_task", "_flusher_task", "_ping_interval_task")
    return [t for t in (getattr(nc, n, None) for n in names) if isinstance(t, asyncio.Task)]


async def _connect(url: str, outage: OutageLog):
    return await nats.connect(url, name="t", error_cb=outage.error, reconnected_cb=outage.reconnected,
                              max_reconnect_attempts=-1, reconnect_time_wait=0.01)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


async def test_an_outage_is_logged_once_and_its_end_once(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    server = await EmbeddedNats(tmp_path / "nats").start_async()
    outage = OutageLog(logging.getLogger(LOGGER), "t", server.url)
    nc = await _connect(server.client_url(), outage)
    try:
        for round_ in (1, 2):
            server.kill()
            await _until(lambda: outage.failures >= 30, "thirty failed reconnect attempts")
            assert len(_warnings(caplog)) == 2 * round_ - 1, _warnings(caplog)
            await server.start_async()          # same port: the client comes back by itself
            await _until(lambda: nc.is_connected and not outage.in_outage, "the reconnect")
            warnings = _warnings(caplog)
            assert len(warnings) == 2 * round_ and "reconnected after" in warnings[-1], warnings
        assert "nats connection t to nats://" in _warnings(caplog)[0]
    finally:
        await close_connection(nc)
        await server.stop_async()


async def test_close_is_bounded_when_the_server_is_gone(tmp_path):
    await _close_when_the_server_is_gone(tmp_path)


def test_close_is_bounded_when_the_server_is_gone_on_uvloop(tmp_path):
    """On uvloop (what the serving commands run on, api.server.run_serving) the close's final flush to the
    closed transport raises RuntimeError ("the handler is closed") where asyncio's loop drops the bytes."""
    uvloop.run(_close_when_the_server_is_gone(tmp_path))


async def _close_when_the_server_is_gone(tmp_path) -> None:
    server = await EmbeddedNats(tmp_path / "nats").start_async()
    outage = OutageLog(logging.getLogger(LOGGER), "t", server.url)
    nc = await _connect(server.client_url(), outage)
    await nc.subscribe("t.x")
    server.kill()
    await _until(lambda: outage.failures >= 10, "ten failed reconnect attempts")
    for _ in range(100):                  # buffered while reconnecting: the close's final flush fails
        await nc.publish("t.x", b"x" * 1000)
    began = time.monotonic()
    await close_connection(nc, timeout=1.0)
    assert time.monotonic() - began < 2.0
    assert nc.is_closed
    assert all(t.done() for t in _client_tasks(nc))
    await close_connection(nc)            # closing again is a no-op


async def test_drain_falls_back_to_a_bounded_close_while_reconnecting(tmp_path):
    server = await EmbeddedNats(tmp_path / "nats").start_async()
    outage = OutageLog(logging.getLogger(LOGGER), "t", server.url)
    nc = await _connect(server.client_url(), outage)
    await nc.subscribe("t.y")
    server.kill()
    await _until(lambda: nc.is_reconnecting, "the client to reconnect")
    began = time.monotonic()
    await drain_connection(nc, timeout=1.0)   # nats-py's drain refuses while reconnecting
    assert time.monotonic() - began < 3.0
    assert nc.is_closed and all(t.done() for t in _client_tasks(nc))


async def test_a_fresh_recorder_connection_ends_the_callers_outage(tmp_path, caplog):
    from eventlog import JetStreamRecorder, StreamSpec

    caplog.set_level(logging.DEBUG, logger=LOGGER)
    server = await EmbeddedNats(tmp_path / "nats").start_async()
    outage = OutageLog(logging.getLogger(LOGGER), "t", server.url)
    for _ in range(5):                    # what a dropped connection's retries reported
        await outage.error(ConnectionRefusedError(111, "Connect call failed"))
    assert outage.in_outage and len(_warnings(caplog)) == 1
    rec = await JetStreamRecorder.connect(server.url, StreamSpec(name="TCONN", subject_prefix="tconn.j"),
                                          outage=outage, auth=server.auth())
    try:
        assert not outage.in_outage
        assert len(_warnings(caplog)) == 2 and "reconnected after" in _warnings(caplog)[-1]
    finally:
        await rec.close()
        await server.stop_async()


async def test_a_server_closing_before_its_info_is_part_of_the_outage(caplog):
    """A reconnect that reaches a stopping server (the TCP accept, then EOF before INFO: nats-py raises the
    plain Error class) is one more failure of the outage, not a line of its own (make test, s15: the
    runtime's connection logged it beside the outage's line when SIGTERM reached nats-server first)."""
    import nats.errors

    caplog.set_level(logging.DEBUG, logger=LOGGER)
    outage = OutageLog(logging.getLogger(LOGGER), "t", "nats://127.0.0.1:4222")
    await outage.error(nats.errors.UnexpectedEOF())
    await outage.error(nats.errors.Error("nats: empty response from server when expecting INFO message"))
    await outage.error(ConnectionRefusedError(111, "Connection refused"))
    assert len(_warnings(caplog)) == 1 and outage.failures == 3, _warnings(caplog)
    await outage.error(nats.errors.Error("nats: something else"))   # not about reaching it: a line each
    assert len(_warnings(caplog)) == 2
