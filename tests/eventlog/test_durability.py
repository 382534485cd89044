"""Acknowledged writes survive kill -9 of nats-server (sync_interval: always)."""

from __future__ import annotations

import asyncio

import pytest

from eventlog import EmbeddedNats, JetStreamRecorder, JournalUnavailable, StreamSpec

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_acked_writes_survive_kill_9(tmp_path):
    spec = StreamSpec(name="DURABLE", max_bytes=64 << 20)
    server = EmbeddedNats(tmp_path / "nats").start()
    try:
        rec = await JetStreamRecorder.connect(server.client_url(), spec)
        incarnation = (await rec.stream_info()).created
        acked: dict[int, bytes] = {}

        async def one(i: int) -> None:
            data = f"record-{i}".encode() * 10
            ack = await rec.append(spec.subject(f"l{i % 4}", "t"), data, msg_id=f"m{i}")
            acked[ack.seq] = data

        await asyncio.gather(*(one(i) for i in range(300)))
        server.kill()
        impatient = JetStreamRecorder(rec.nc, spec, owns_connection=False, timeout=0.5)
        with pytest.raises(JournalUnavailable):
            await impatient.append(spec.subject("l0", "t"), b"after death", msg_id="late")
        await rec.close()

        server.start()
        rec = await JetStreamRecorder.connect(server.client_url(), spec)
        status = await rec.stream_info()
        assert status.created == incarnation  # same file incarnation
        got = {m.seq: m.data async for m in rec.read(1)}
        assert {s: got.get(s) for s in acked} == acked
        assert len(got) >= len(acked)
        again = await rec.append(spec.subject("l0", "t"), b"x", msg_id="m0")
        assert again.duplicate  # the dedup window survived the restart too
        await rec.close()
    finally:
        server.stop()
