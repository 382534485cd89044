"""The codec over the real log: ticks appended to JetStream replay into the same transfers."""

import pytest

from aotx.journal import Emitter, Reassembler, TransferError, TransferKind, lineage_hash
from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec

pytestmark = pytest.mark.asyncio(loop_scope="session")

LINEAGE = "0123456789abcdef0123456789abcdef"


async def test_ticks_replay_after_kill_9(tmp_path):
    spec = StreamSpec(name="JOURNAL_IT")
    subject = spec.subject(LINEAGE, "tick")
    emitter = Emitter(lineage_hash(LINEAGE))
    bodies = [{"n": i, "text": "w" * (i * 37)} for i in range(40)]
    for i, body in enumerate(bodies):
        emitter.submit(TransferKind.OUTPUT if i % 2 else TransferKind.ADMISSION, body)
    with EmbeddedNats(tmp_path) as server:
        rec = await JetStreamRecorder.connect(server.client_url(), spec)
        last = 0
        for tick in emitter.drain():
            ack = await rec.append(subject, tick.data, msg_id=tick.msg_id, expected_last_subject_seq=last)
            resent = await rec.append(subject, tick.data, msg_id=tick.msg_id)
            assert resent.duplicate and resent.seq == ack.seq
            last = ack.seq
        await rec.close()
        server.kill()
        server.start()
        rec = await JetStreamRecorder.connect(server.client_url(), spec)
        replay = Reassembler(recovery=True)
        got = []
        async for msg in rec.read(1):
            got += replay.feed_message(msg.data, position=msg.seq)
        replay.finish()
        assert [t.body for t in got] == bodies

        # a tail cut mid-transfer (the last tick of a multi-tick transfer never landed) fails closed
        cut = Emitter(lineage_hash(LINEAGE), next_transfer_id=41)
        cut.submit(TransferKind.OUTPUT, {"text": "z" * 4000})
        await rec.append(subject, cut.tick().data, expected_last_subject_seq=last)
        replay = Reassembler(recovery=True)
        async for msg in rec.read(1):
            replay.feed_message(msg.data, position=msg.seq)
        with pytest.raises(TransferError, match="transfer 41 part 16/26 .*incomplete"):
            replay.finish()
        await rec.close()
