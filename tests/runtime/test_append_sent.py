"""A round of one-tick flights on the lean path (every tick sent, then every ack awaited: write_order.append_sent)
answers each flight exactly as the one-append-per-flight path does: a lost ack puts the round on hold and the
read-back applies what landed, a guard another writer broke answers that lineage 409 and the others land; live
state = a fresh full replay of the same log. The recorder is a real JetStreamRecorder whose class has
send_append, so the writer takes that path (a wrapper that only delegates does not: tests/runtime/
test_lost_ack_order.py holds the other path to the same outcomes)."""

from __future__ import annotations

import pytest

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind
from eventlog import JetStreamRecorder, JournalUnavailable, StreamSpec
from tests.runtime.test_lost_ack_order import _round, body

M = MutationKind


class CountingRecorder(JetStreamRecorder):
    """A real recorder counting the appends sent on the lean path; `lose_next` loses the next one's ack
    (it lands, and answers JournalUnavailable as a dropped connection would)."""

    sent = 0
    lose_next = False

    async def send_append(self, *args, **kw):
        self.sent += 1
        return await super().send_append(*args, **kw)

    async def append_sent(self, sent, subject, expected=None):
        lose, self.lose_next = self.lose_next, False
        ack = await super().append_sent(sent, subject, expected)
        if lose:
            raise JournalUnavailable(f"ack of message {ack.seq} lost (test)")
        return ack


async def _replayed_equal(rt: SharedRuntime, spec: StreamSpec, recorder) -> None:
    full = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
    try:
        assert rt.state_hash() == full.state_hash()
        assert rt.projector.chains == full.projector.chains
        assert rt.projector.last_subject_seq == full.projector.last_subject_seq
    finally:
        await full.stop()


async def test_a_lost_ack_on_the_lean_path(nats_url):
    spec = StreamSpec(name="RT_SENTLOST", subject_prefix="rtsl.j")
    recorder = await CountingRecorder.connect(nats_url, spec)
    rt = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
    try:
        for who in ("alice", "bob"):
            assert (await _round(rt, (who, M.REGISTER, body(who, 1, 1), None)))[0].status == 201
        recorder.lose_next, before = True, recorder.sent
        first, second = await _round(rt, ("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"), None),
                                     ("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"), None))
        assert recorder.sent == before + 2   # both sent before either ack was awaited
        assert first.status == 429 and first.body["error"]["type"] == "journal_hold", first.body
        assert second.status == 429, second.body
        again = await _round(rt, ("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"), None),
                             ("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"), None))
        assert [o.status for o in again] == [200, 200], [o.body for o in again]
        assert rt.projector.messages == (await recorder.stream_info()).last_seq == 4
        await _replayed_equal(rt, spec, recorder)
    finally:
        await rt.stop()
        await recorder.close()


class Delegating:
    """A wrapper that only delegates: its class has no send_append, so the writer appends one by one."""

    def __init__(self, inner: JetStreamRecorder) -> None:
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("lean", [True, False], ids=["sent", "append"])
async def test_another_writers_message_fails_one_flight_of_the_round(nats_url, lean):
    """Bob's guard is wrong (another runtime wrote his lineage): his flight answers 409, and the flights
    acknowledged after the unknown message wait for the read-back (429), on either path alike."""
    spec = StreamSpec(name=f"RT_SENTCONFLICT{int(lean)}", subject_prefix=f"rtsc{int(lean)}.j")
    inner = await CountingRecorder.connect(nats_url, spec)
    recorder = inner if lean else Delegating(inner)
    rt = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
    try:
        for who in ("alice", "bob", "carol"):
            assert (await _round(rt, (who, M.REGISTER, body(who, 1, 1), None)))[0].status == 201
        other = await SharedRuntime(nats_url, spec, progress=False).start()   # another writer, booted on the log
        try:
            out = await submit_body(other, Actor("bob", Grants.all()), M.CREATE_SPACE, body("bob", 2, 9, scope="room"))
            assert out.status == 201, out.body
        finally:
            await other.stop()
        before = inner.sent
        outs = await _round(rt, *((who, M.CREATE_SPACE, body(who, 2, 2, scope="private"), None)
                                  for who in ("alice", "bob", "carol")))
        assert inner.sent == before + 3, (inner.sent, before)
        assert [o.status for o in outs] == [429, 409, 429], [o.body for o in outs]
        assert outs[1].body["error"]["type"] == "conflict"
        again = await _round(rt, *((who, M.CREATE_SPACE, body(who, 2, 2, scope="private"), None)
                                   for who in ("alice", "bob", "carol")))
        assert [o.status for o in again] == [200, 409, 200], [o.body for o in again]   # bob's 2 is another op
        await _replayed_equal(rt, spec, recorder)
    finally:
        await rt.stop()
        await inner.close()
