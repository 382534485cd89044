"""A follower's ordered consumer whose server side vanished (the node that held it died: an ordered
consumer is one replica, in memory) is made again within seconds, not after nats-py's default two missed
5 s heartbeats checked every 10 s (10-20 s): docs/CONTRACTS.md, "Hardening: read-your-writes after a lease
move" (a runtime's follower stalled that long after a node change in the cluster drill)."""
from __future__ import annotations

import asyncio

from eventlog import JetStreamRecorder, StreamSpec
from eventlog.jetstream import FOLLOW_HEARTBEAT


async def test_a_follower_whose_consumer_vanished_follows_again_within_a_few_heartbeats(nats_server):
    spec = StreamSpec(name="FOLLOWHB", subject_prefix="followhb.j")
    rec = await JetStreamRecorder.connect(nats_server.client_url(), spec)
    try:
        subject = spec.subject("l1", "t")
        await rec.append(subject, b"one")
        sub = await rec.subscribe(1)
        assert (await asyncio.wait_for(sub.__anext__(), 30)).data == b"one"
        jsm = rec.nc.jsm()
        for info in await jsm.consumers_info(spec.name):   # gone, as with its node
            await jsm.delete_consumer(spec.name, info.name)
        await rec.append(subject, b"two")
        # made again once two heartbeats were missed (checked every 2 heartbeats): within 4, and some slack
        got = await asyncio.wait_for(sub.__anext__(), 8 * FOLLOW_HEARTBEAT)
        assert got.seq == 2 and got.data == b"two"
        await sub.close()
    finally:
        await rec.close()
