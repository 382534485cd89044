"""A guarded append refused by a node that had not applied it, though it landed (a former leader just
resumed, answering beside the new one: seen in the cluster drill after a SIGSTOP of the stream leader),
and whose refusal a replica's stale read of the subject's last message seems to contradict: the writer
sends it again, the log answers the repeat as a duplicate of the write's own message id, and that is the
write's landing, not a fault that stops the runtime. Live state = a fresh replay of the same log.

The stale leader is a real JetStream recorder on a 3-node cluster (a clustered stream's leader checks the
message id before the guard; a lone server checks the guard first and refuses the repeat) whose next append
lands but answers ConcurrencyConflict, and whose next read of the subject's last message answers the
sequence from before the write."""

from __future__ import annotations

import json

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import ConcurrencyConflict, JetStreamRecorder, StreamSpec

M = MutationKind


def body(who: str, seq: int, key: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(who).hex(),
                       "operation_key": f"{key:032x}", "sequence": str(seq), **fields}).encode()


class StaleLeaderRecorder:
    """A real recorder; `stale_next`: the next append lands but is answered as refused by the guard, and
    the next read of its subject's last message answers where the subject stood before it."""

    def __init__(self, inner: JetStreamRecorder) -> None:
        self.inner, self.stale_next, self.stale_last, self.landed = inner, False, None, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def append(self, subject, data, *, msg_id=None, expected_last_subject_seq=None):
        stale, self.stale_next = self.stale_next, False
        ack = await self.inner.append(subject, data, msg_id=msg_id, expected_last_subject_seq=expected_last_subject_seq)
        if stale:
            self.landed.append(ack.seq)
            self.stale_last = expected_last_subject_seq
            raise ConcurrencyConflict(subject, expected_last_subject_seq, f"wrong last sequence (a stale leader, test): {ack.seq} landed")
        return ack

    async def last_subject_seq(self, subject):
        stale, self.stale_last = self.stale_last, None
        return stale if stale is not None else await self.inner.last_subject_seq(subject)


async def test_a_repeat_answered_as_a_duplicate_of_its_own_message_id_is_the_writes_landing(cluster):
    spec = StreamSpec(name="RT_STALE", subject_prefix="rtst.j")
    recorder = StaleLeaderRecorder(await JetStreamRecorder.connect(cluster.urls, spec, auth=cluster.auth()))
    rt = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
    try:
        assert (await submit_body(rt, Actor("alice", Grants.all()), M.REGISTER, body("alice", 1, 1))).status == 201
        recorder.stale_next = True
        out = await submit_body(rt, Actor("alice", Grants.all()), M.CREATE_SPACE, body("alice", 2, 2, scope="private"))
        assert out.status == 201, out.body          # before: 503, "answered a fresh message id as a duplicate"
        assert recorder.landed == [2] and rt.projector.messages == (await recorder.stream_info()).last_seq == 2
        out = await submit_body(rt, Actor("alice", Grants.all()), M.CREATE_SPACE, body("alice", 3, 3, scope="room"))
        assert out.status == 201, out.body          # the runtime writes on
        full = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
        try:
            assert rt.state_hash() == full.state_hash()
            assert rt.projector.last_subject_seq == full.projector.last_subject_seq
        finally:
            await full.stop()
    finally:
        await rt.stop()
        await recorder.inner.close()


class StaleBatchLeader(StaleLeaderRecorder):
    """The same for an atomic batch: it lands, the answer is a refusal by the guard."""

    async def append_batch(self, messages):
        stale, self.stale_next = self.stale_next, False
        acks = await self.inner.append_batch(messages)
        if stale:
            self.landed += [a.seq for a in acks]
            self.stale_last = messages[0].expected_last_subject_seq
            raise ConcurrencyConflict(None, messages[0].expected_last_subject_seq, "wrong last sequence (test)")
        return acks


async def test_a_repeated_batch_answered_as_already_stored_is_read_back_not_a_fault(cluster):
    """A batch's repeat is refused whole as holding stored ids (no sequences named): the write is on hold
    as one whose landing is unknown (429, nothing lost), the read-back finds it landed, and the same input
    again answers its receipt; the runtime never stops."""
    spec = StreamSpec(name="RT_STALEB", subject_prefix="rtsb.j")
    recorder = StaleBatchLeader(await JetStreamRecorder.connect(cluster.urls, spec, auth=cluster.auth()))
    rt = await SharedRuntime(spec=spec, recorder=recorder, progress=False, batch_min_messages=1).start()
    try:
        assert (await submit_body(rt, Actor("alice", Grants.all()), M.REGISTER, body("alice", 1, 1))).status == 201
        recorder.stale_next = True
        create = body("alice", 2, 2, scope="private")
        out = await submit_body(rt, Actor("alice", Grants.all()), M.CREATE_SPACE, create)
        assert out.status in (201, 429), out.body   # before: 503 runtime_failed
        assert recorder.landed, "the batch path was not taken"
        again = await submit_body(rt, Actor("alice", Grants.all()), M.CREATE_SPACE, create)
        assert again.status in (200, 201), again.body
        assert rt.projector.messages == (await recorder.stream_info()).last_seq
        full = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
        try:
            assert rt.state_hash() == full.state_hash()
        finally:
            await full.stop()
    finally:
        await rt.stop()
        await recorder.inner.close()
