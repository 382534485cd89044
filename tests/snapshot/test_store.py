"""The snapshot bucket on a real nats-server: one per journal, newest two kept, and a write cut short by kill -9
leaves the older snapshot (or none) — never a broken one that a boot would use."""

from __future__ import annotations

import contextlib
import datetime
import os
import subprocess
import sys
import textwrap

import pytest

from aotx.snapshot import SnapshotStore, encode_snapshot, load_newest, snapshot_name
from eventlog import BlobUnreadable, SnapshotBucket, StreamStatus, snapshot_bucket_name
from tests.waiting import wait_until_async

from .journal import INCARNATION, SOURCE, rich_log

CREATED = datetime.datetime.fromisoformat(INCARNATION)


def status(last_seq: int, first_seq: int = 1, name: str = SOURCE, created=CREATED) -> StreamStatus:
    return StreamStatus(name=name, created=created, messages=last_seq - first_seq + 1, bytes=0, first_seq=first_seq,
                        last_seq=last_seq, max_bytes=None)


@contextlib.asynccontextmanager
async def opened(nats_url: str, *streams: str):
    stores = [await SnapshotStore.connect(nats_url, stream) for stream in streams]
    try:
        yield stores[0] if len(stores) == 1 else stores
    finally:
        for store in stores:
            await store.close()


async def test_each_journal_has_its_own_bucket(nats_url):
    assert snapshot_bucket_name("AOTX_JOURNAL") == "AOTX_JOURNAL_SNAPSHOTS"
    async with opened(nats_url, "STORE_A", "STORE_B") as (a, b):
        await a.bucket.put("00000000000000000001-0000000000000000", b"of A")
        assert [e.name for e in await a.listing()] == ["00000000000000000001-0000000000000000"]
        assert await b.listing() == []
        assert await a.get("00000000000000000001-0000000000000000") == b"of A"


async def test_blobs_round_trip_over_many_chunks_and_a_lost_chunk_is_unreadable(nats_url):
    async with opened(nats_url, "STORE_BIG") as store:
        big = os.urandom(700_000)   # six 128 KiB chunks
        await store.bucket.put("big", big)
        assert await store.get("big") == big
        info = await store.bucket._obs.get_info("big")
        await store.bucket.js.purge_stream(store.bucket.stream, subject=f"$O.{store.bucket.bucket}.C.{info.nuid}")
        with pytest.raises(BlobUnreadable, match="0 bytes stored"):
            await store.get("big")
        with pytest.raises(BlobUnreadable, match="no such object"):
            await store.get("never-written")


async def test_save_keeps_the_newest_two_of_this_incarnation_and_removes_every_other_name(nats_url):
    async with opened(nats_url, "STORE_KEEP") as store:
        foreign = snapshot_name(SOURCE, "2025-01-01T00:00:00+00:00", 999)
        await store.bucket.put(foreign, b"another incarnation")
        await store.bucket.put("not-a-snapshot", b"junk")
        names = []
        for covered in (10, 20, 30):
            name, removed = await store.save(b"snapshot %d" % covered, SOURCE, INCARNATION, covered)
            names.append(name)
        assert [e.name for e in await store.listing()] == [names[2], names[1]]
        assert [e.covered for e in await store.listing()] == [30, 20]
        assert removed == [names[0]]
        info = await store.bucket.js.stream_info(store.bucket.stream, subjects_filter=f"$O.{store.bucket.bucket}.>")
        assert len(info.state.subjects) == 4   # two metas and their chunks: nothing of the removed ones is left


_CUT_SHORT = textwrap.dedent("""
    import asyncio, io, os, threading
    from eventlog import SnapshotBucket

    class Source(io.RawIOBase):
        # serves three 128 KiB chunks of the snapshot, then stalls until the process is killed
        served = 0
        def readable(self):
            return True
        def readinto(self, buf):
            if self.served == 3:
                threading.Event().wait()
            self.served += 1
            buf[:] = os.urandom(len(buf))
            return len(buf)

    async def main():
        bucket = await SnapshotBucket.connect(os.environ["SNAP_URL"], os.environ["SNAP_STREAM"])
        await bucket._obs.put(os.environ["SNAP_NAME"], io.BufferedReader(Source()))
    asyncio.run(main())
""")


async def test_kill_9_during_an_upload_leaves_the_older_snapshot(nats_url):
    async with opened(nats_url, "STORE_KILL") as store:
        log = rich_log()
        older = encode_snapshot(log.live)
        await store.save(older, SOURCE, INCARNATION, log.live.messages)
        bucket: SnapshotBucket = store.bucket
        chunks = f"$O.{bucket.bucket}.C.>"

        async def chunk_subjects() -> dict:
            return (await bucket.js.stream_info(bucket.stream, subjects_filter=chunks)).state.subjects or {}

        before = await chunk_subjects()
        newer = snapshot_name(SOURCE, INCARNATION, log.live.messages + 100)
        env = {**os.environ, "SNAP_URL": nats_url, "SNAP_STREAM": "STORE_KILL", "SNAP_NAME": newer}
        child = subprocess.Popen([sys.executable, "-c", _CUT_SHORT], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        try:
            await wait_until_async(chunk_subjects, "the child's first chunks to land",
                                   done=lambda subjects: any(n >= 3 for s, n in subjects.items() if s not in before))
            child.kill()   # SIGKILL, mid-upload
            child.wait()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -9, child.stderr.read()
        assert [e.name for e in await store.listing()] == [snapshot_name(SOURCE, INCARNATION, log.live.messages)]
        assert len(await chunk_subjects()) == len(before) + 1   # the cut-short chunks, named by no meta
        loaded = await load_newest(store, status(log.live.messages), log.live.state.capacities)
        assert loaded is not None and loaded[1] == log.live.messages + 1
        assert await bucket.collect() == 1
        assert await chunk_subjects() == before
