"""eventlog.publish (the lean append path: acks on one inbox) against a real nats-server: the bytes it
sends are js.publish's, every answer maps as js.publish's does, many in flight are acked in order, a
publish left unanswered fails at its deadline, and a server restart mid-flight fails what was in flight
and leaves the inbox working, the same outcomes as the js.publish path (run beside it)."""

from __future__ import annotations

import asyncio
import itertools

import nats
import nats.errors
import nats.js.errors
import pytest

from eventlog import (ConcurrencyConflict, EmbeddedNats, JetStreamRecorder, JournalUnavailable, StreamSpec,
                      close_connection, connect, flush_subscriptions)
from eventlog.publish import AckInbox
from tests.waiting import wait_until_async

pytestmark = pytest.mark.asyncio(loop_scope="session")
_names = itertools.count(1)


def _spec() -> StreamSpec:
    n = next(_names)
    return StreamSpec(name=f"PUB{n}", subject_prefix=f"pub{n}.j")


async def _recorder(server, spec: StreamSpec, *, timeout: float = 5.0, lean: bool = True) -> JetStreamRecorder:
    """A recorder on the lean path (our client) or on js.publish (a plain nats-py connection)."""
    if lean:
        rec = await JetStreamRecorder.connect(server.client_url(), spec, timeout=timeout)
        assert rec._acks is not None
        return rec
    nc = await nats.connect(server.client_url(), max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    rec = await JetStreamRecorder.attach(nc, spec, timeout=timeout)
    assert rec._acks is None
    return rec


async def _close(rec: JetStreamRecorder) -> None:
    await rec.close()
    if not rec._owns_connection:
        await close_connection(rec.nc)


async def test_the_same_bytes_as_js_publish(nats_server):
    """A core subscriber on the stream's subject sees both paths' messages: the same header block (the
    same order, values cleaned as nats-py cleans them) and payload; the reply subject an inbox."""
    spec = _spec()
    rec = await _recorder(nats_server, spec)
    seen: list[tuple[bytes, bytes | None]] = []
    watcher = await connect(nats_server.client_url(), name="t-watch")
    try:
        await watcher.subscribe_raw(spec.subject("a", "t"), lambda data, headers: seen.append((data, headers)))
        await flush_subscriptions(watcher)
        js = rec.nc.jetstream()
        subject, payload = spec.subject("a", "t"), bytes(range(256)) * 3
        cases = [(" id-1\r\nx ", 0), ("id-2", None), (None, 0), (None, None), ("ü-3", 7)]
        for msg_id, expected in cases:
            headers = {}
            if msg_id is not None:
                headers["Nats-Msg-Id"] = msg_id
            if expected is not None:
                headers["Nats-Expected-Last-Subject-Sequence"] = str(expected)
            for send in (lambda: js.publish(subject, payload, headers=headers or None, stream=spec.name),
                         lambda: rec._acks.publish(subject, payload, msg_id, expected)):
                try:
                    await send()
                except nats.js.errors.APIError:   # a guard or a repeated id refused: the bytes still went out
                    pass
        await wait_until_async(lambda: len(seen) == 2 * len(cases), "every message seen by the watcher")
        for i in range(len(cases)):
            assert seen[2 * i] == seen[2 * i + 1], cases[i]
        assert seen[0][1] == (b"NATS/1.0\r\nNats-Msg-Id: id-1  x\r\nNats-Expected-Last-Subject-Sequence: 0\r\n"
                              b"Nats-Expected-Stream: " + spec.name.encode() + b"\r\n\r\n")
    finally:
        await close_connection(watcher)
        await _close(rec)


async def test_many_in_flight_are_acked_each_with_its_own_sequence(nats_server):
    spec = _spec()
    rec = await _recorder(nats_server, spec)
    try:
        subjects = [spec.subject(f"l{i}", "t") for i in range(4)]
        acks = await asyncio.gather(*(rec.append(subjects[i % 4], f"m{i}".encode(), msg_id=f"id{i}")
                                      for i in range(300)))
        assert sorted(a.seq for a in acks) == list(range(1, 301))
        assert all(a.stream == spec.name and not a.duplicate for a in acks)
        stored = {m.seq: m.data async for m in rec.read(1)}
        assert all(stored[a.seq] == f"m{i}".encode() for i, a in enumerate(acks))   # each ack is its own message
        # one lineage, sent in order: acked in that order
        chained = [await rec.append(subjects[0], b"x", expected_last_subject_seq=None) for _ in range(3)]
        assert [a.seq for a in chained] == [301, 302, 303]
        again = await rec.append(subjects[1], b"m1", msg_id="id1")
        assert again.duplicate and again.seq == acks[1].seq
        assert rec._acks.pending == 0
    finally:
        await _close(rec)


async def test_a_wrong_last_sequence_is_a_conflict(nats_server):
    spec = _spec()
    rec = await _recorder(nats_server, spec)
    try:
        a = spec.subject("a", "t")
        assert (await rec.append(a, b"1", expected_last_subject_seq=0)).seq == 1
        with pytest.raises(ConcurrencyConflict) as info:
            await rec.append(a, b"2", expected_last_subject_seq=0)
        assert (info.value.subject, info.value.expected) == (a, 0) and "10071" in str(info.value)
        with pytest.raises(nats.js.errors.BadRequestError) as raw:
            await rec._acks.publish(a, b"2", None, 5)
        assert raw.value.err_code == 10071
    finally:
        await _close(rec)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "js.publish"])
async def test_no_responders_and_timeout(nats_server, lean):
    """No stream and no subscriber: the server's 503; a subscriber that never answers: the deadline."""
    spec = _spec()
    rec = await _recorder(nats_server, spec, timeout=0.3, lean=lean)
    silent = await connect(nats_server.client_url(), name="t-silent")
    try:
        with pytest.raises(JournalUnavailable, match="no stream answered the publish"):
            await rec.append("nobody.listens.here", b"x", msg_id="n1")
        await silent.subscribe_raw("silent.subject", lambda data, headers: None)
        await flush_subscriptions(silent)
        loop = asyncio.get_running_loop()
        began = loop.time()
        outcomes = await asyncio.gather(*(rec.append("silent.subject", b"x") for _ in range(3)),
                                        return_exceptions=True)
        assert loop.time() - began >= 0.3, outcomes
        for exc in outcomes:
            assert isinstance(exc, JournalUnavailable) and "timed out waiting for the ack" in str(exc), exc
            assert isinstance(exc.__cause__, nats.errors.TimeoutError)
        if lean:
            assert rec._acks.pending == 0
        assert (await rec.append(spec.subject("a", "t"), b"ok")).seq == 1   # the inbox still works
    finally:
        await close_connection(silent)
        await _close(rec)


async def test_an_invalid_subject_and_a_closed_connection_raise_as_js_publish(nats_server):
    spec = _spec()
    rec = await _recorder(nats_server, spec)
    js = rec.nc.jetstream()
    for bad in ("has space", ""):
        with pytest.raises(nats.errors.BadSubjectError):
            await rec._acks.publish(bad, b"x")
        with pytest.raises(nats.errors.BadSubjectError):
            await js.publish(bad, b"x")
    await rec.close()
    with pytest.raises(JournalUnavailable, match="ConnectionClosedError"):
        await rec.append(spec.subject("a", "t"), b"x")


async def test_a_cancelled_append_leaves_the_inbox_working(nats_server):
    spec = _spec()
    rec = await _recorder(nats_server, spec, timeout=0.3)
    silent = await connect(nats_server.client_url(), name="t-silent2")
    try:
        await silent.subscribe_raw("silent.two", lambda data, headers: None)
        await flush_subscriptions(silent)
        task = asyncio.ensure_future(rec.append("silent.two", b"x"))
        await wait_until_async(lambda: rec._acks.pending == 1, "the append in flight")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until_async(lambda: rec._acks.pending == 0, "the cancelled append's entry dropped at its deadline")
        assert (await rec.append(spec.subject("a", "t"), b"ok")).seq == 1
    finally:
        await close_connection(silent)
        await _close(rec)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "js.publish"])
async def test_a_server_restart_mid_flight(tmp_path, lean):
    """Appends in flight when nats-server is stopped and killed fail with JournalUnavailable at their
    deadline (their acks can never come); once the server is back, appends are acked again (the inbox
    subscribed again by the reconnect), the stream holding whatever landed."""
    spec = _spec()
    server = await EmbeddedNats(tmp_path / "nats").start_async()
    rec = await _recorder(server, spec, timeout=1.5, lean=lean)
    try:
        subject = spec.subject("a", "t")
        assert (await rec.append(subject, b"before")).seq == 1
        server.pause()   # the server reads nothing more: the next appends wait for acks that never come
        flight = [asyncio.ensure_future(rec.append(subject, f"in flight {i}".encode(), msg_id=f"f{i}"))
                  for i in range(4)]
        await asyncio.sleep(0)
        server.kill()
        outcomes = await asyncio.gather(*flight, return_exceptions=True)
        for exc in outcomes:
            assert isinstance(exc, JournalUnavailable), exc
        await server.start_async()
        await wait_until_async(lambda: rec.nc.is_connected, "the reconnect")

        async def appended():
            try:
                return await rec.append(subject, b"after", msg_id="after")
            except JournalUnavailable:   # JetStream still recovering the stream after the restart
                return None
        ack = await wait_until_async(appended, "an append acked after the restart", timeout=30)
        stored = [m.data async for m in rec.read(1)]
        assert stored[0] == b"before" and stored[-1] == b"after" and ack.seq == len(stored)
        if lean:
            assert rec._acks.pending == 0
    finally:
        await _close(rec)
        await server.stop_async()


REPLIES = (b'{"stream":"X","seq":5}', b'{"stream":"X","seq":18446744073709551615,"duplicate":true}',
           b'{"seq":5,"stream":"X","duplicate":false}', b'{"stream":"X","seq":NaN}', b"not json", b"",
           b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}', b'{"seq":5}',
           b'\xef\xbb\xbf{"stream":"X","seq":7}', b'{"stream":"X","stream":"Y","seq":8}')


def _outcome(coro_result) -> tuple:
    if isinstance(coro_result, BaseException):
        return type(coro_result), str(coro_result)
    return "ack", coro_result


async def test_any_reply_decodes_as_js_publish_decodes_it(nats_server):
    """An ack's JSON is read by msgspec where it takes it, else by json.loads: every reply below — acks,
    an error, JSON that msgspec refuses (NaN, a BOM), no JSON at all, a key twice — answers the lean
    publish as it answers js.publish (the same value, or the same exception and message)."""
    spec = _spec()
    rec = await _recorder(nats_server, spec)
    js = rec.nc.jetstream()
    answering = await connect(nats_server.client_url(), name="t-answering")
    replies = iter(REPLIES * 2)

    async def answer(msg) -> None:
        await msg.respond(next(replies))
    try:
        await answering.subscribe("answers.here", cb=answer)
        await flush_subscriptions(answering)
        lean = [_outcome(r) for r in await asyncio.gather(
            *(rec._acks.publish("answers.here", b"x") for _ in REPLIES), return_exceptions=True)]
        ours = [_outcome(r) for r in await asyncio.gather(
            *(js.publish("answers.here", b"x") for _ in REPLIES), return_exceptions=True)]
        ours = [("ack", (a.stream, a.seq, bool(a.duplicate))) if kind == "ack" else (kind, a) for kind, a in ours]
        assert lean == ours
        assert lean[0] == ("ack", ("X", 5, False)) and lean[1] == ("ack", ("X", (1 << 64) - 1, True))
    finally:
        await close_connection(answering)
        await _close(rec)
