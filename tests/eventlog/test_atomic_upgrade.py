"""A journal stream made without atomic batches is upgraded when a recorder connects; a stream
without them (or one turned off by another writer) makes append_batch refuse, so the caller can
append message by message."""

from __future__ import annotations

import pytest

from eventlog import AtomicBatchUnsupported, BatchMessage, JetStreamRecorder, StreamSpec

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_an_old_stream_is_upgraded_on_connect(nats_server):
    old = StreamSpec(name="UPG1", subject_prefix="upg1.j", allow_atomic=False)
    rec = await JetStreamRecorder.connect(nats_server.client_url(), old)
    try:
        assert rec.atomic_batches is False
        await rec.append(old.subject("a", "t"), b"before")
        with pytest.raises(AtomicBatchUnsupported):
            await rec.append_batch([BatchMessage(old.subject("a", "t"), b"x")])
        assert (await rec.stream_info()).messages == 1
    finally:
        await rec.close()
    new = StreamSpec(name="UPG1", subject_prefix="upg1.j")
    rec = await JetStreamRecorder.connect(nats_server.client_url(), new)
    try:
        assert rec.atomic_batches is True
        acks = await rec.append_batch([BatchMessage(new.subject("a", "t"), b"1", "u1", 1),
                                       BatchMessage(new.subject("b", "t"), b"2", "u2", 0)])
        assert [a.seq for a in acks] == [2, 3]
        # another writer (an older runtime) updates the stream without allow_atomic
        await rec.js.update_stream(old.config())
        with pytest.raises(AtomicBatchUnsupported):
            await rec.append_batch([BatchMessage(new.subject("a", "t"), b"3", "u3", 2)])
        assert rec.atomic_batches is False
        assert [m.seq async for m in rec.read(1)] == [1, 2, 3]
    finally:
        await rec.close()


async def test_a_read_makes_no_consumer(nats_server):
    spec = StreamSpec(name="RD1", subject_prefix="rd1.j")
    rec = await JetStreamRecorder.connect(nats_server.client_url(), spec)
    try:
        for i in range(5):
            await rec.append(spec.subject("a", "t"), b"x")
        async for _ in rec.read(1):
            assert (await rec.js.stream_info(spec.name)).state.consumer_count == 0
    finally:
        await rec.close()
