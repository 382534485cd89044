"""A write whose ack was lost, while another lineage's write of the same round lands after it and is
acknowledged: live state = a fresh full replay of the same log (the writer applies in stream order).

The lost ack is a real JetStream recorder whose append lands but answers JournalUnavailable (as a
dropped connection would). Both appends of the round are published on one connection, so the one
whose ack is lost has the lower stream sequence; the other is acknowledged."""

from __future__ import annotations

import asyncio
import json

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import JetStreamRecorder, JournalUnavailable, StreamSpec

M = MutationKind


def body(who: str, seq: int, key: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(who).hex(),
                       "operation_key": f"{key:032x}", "sequence": str(seq), **fields}).encode()


class LosingRecorder:
    """A real recorder whose next append lands but answers as if its ack were lost."""

    def __init__(self, inner: JetStreamRecorder) -> None:
        self.inner, self.lose_next, self.lost = inner, False, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def append(self, subject, data, **kw):
        lose, self.lose_next = self.lose_next, False
        ack = await self.inner.append(subject, data, **kw)
        if lose:
            self.lost.append(ack.seq)
            raise JournalUnavailable(f"ack of message {ack.seq} lost (test)")
        return ack


async def _round(rt: SharedRuntime, *commands) -> list:
    """Submit commands together: they are queued before the group commit takes them, so one round."""
    return await asyncio.gather(*(submit_body(rt, Actor(who, Grants.all()), kind, raw, resource)
                                  for who, kind, raw, resource in commands))


async def test_a_lost_ack_beside_an_acknowledged_write_leaves_live_equal_to_replay(nats_url):
    spec = StreamSpec(name="RT_LOSTACK", subject_prefix="rtla.j")
    recorder = LosingRecorder(await JetStreamRecorder.connect(nats_url, spec))
    rt = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
    try:
        for who in ("alice", "bob"):   # each lineage's boot record is written: the round holds one tick each
            assert (await _round(rt, (who, M.REGISTER, body(who, 1, 1), None)))[0].status == 201
        recorder.lose_next = True
        first, second = await _round(rt, ("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"), None),
                                     ("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"), None))
        assert first.status == 429 and first.body["error"]["type"] == "journal_hold", first.body
        assert second.status == 429, second.body      # landed after it: applied by the read-back, in order
        # the same inputs again: read back (alice's had landed), then each answers its receipt
        again = await _round(rt, ("alice", M.CREATE_SPACE, body("alice", 2, 2, scope="private"), None),
                             ("bob", M.CREATE_SPACE, body("bob", 2, 2, scope="private"), None))
        assert [o.status for o in again] == [200, 200], [o.body for o in again]
        assert rt.projector.messages == (await recorder.stream_info()).last_seq == 4
        assert recorder.lost == [3]
        full = await SharedRuntime(spec=spec, recorder=recorder, progress=False).start()
        try:
            assert rt.state_hash() == full.state_hash()
            assert rt.projector.chains == full.projector.chains
            assert rt.projector.last_subject_seq == full.projector.last_subject_seq
            # and the live runtime writes on from the same state as the replayed one
            out = await submit_body(rt, Actor("bob", Grants.all()), M.CREATE_SPACE, body("bob", 3, 3, scope="room"))
            assert out.status == 201, out.body
        finally:
            await full.stop()
    finally:
        await rt.stop()
        await recorder.inner.close()
