"""A client on a node that stops answering (SIGSTOP, a partition: the socket stays open) leaves it for
another node within seconds, with its subscriptions: every connection of ours pings (eventlog.connect
PING_INTERVAL). With nats-py's default pings (every 2 minutes) a runtime's command service, a gateway's
requests and a follower stayed on the stopped node, answering 503, until it resumed."""

from __future__ import annotations

import asyncio

import nats.errors

from eventlog import connect
from eventlog.connect import MAX_OUTSTANDING_PINGS, PING_INTERVAL
from tests.waiting import wait_until_async


async def ask(client, data: bytes) -> bytes | None:
    """The echo's answer, asked until the subscription's interest has reached the asking client's node
    (nats-server spreads it over the cluster's routes: a request sent before that has no responders)."""
    async def once() -> bytes | None:
        try:
            return (await client.request("t.stopped.echo", data, timeout=0.5)).data
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            return None

    return await wait_until_async(once, "the echo's answer", timeout=60)


async def test_a_connection_leaves_a_stopped_node_for_another_with_its_subscriptions(cluster):
    moved = asyncio.Event()

    async def reconnected() -> None:
        moved.set()

    nc = await connect(cluster.urls, cluster.auth(), name="t-stopped", reconnected_cb=reconnected,
                       max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    port = nc.connected_url.port
    victim = next(n for n in cluster.nodes if n.port == port)
    elsewhere = ",".join(u for u in cluster.urls.split(",") if not u.endswith(f":{port}"))
    responder = await connect(elsewhere, cluster.auth(), name="t-responder")
    try:
        async def echo(msg) -> None:
            await msg.respond(b"echo:" + msg.data)

        await nc.subscribe("t.stopped.echo", cb=echo)
        await nc.flush()
        assert await ask(responder, b"before") == b"echo:before"   # the interest crossed the cluster's routes
        victim.pause()
        try:
            # 60 s is a bound far above the expected ~(MAX_OUTSTANDING_PINGS + 1) · PING_INTERVAL, and
            # far below nats-py's default of 2 minutes between pings
            assert (MAX_OUTSTANDING_PINGS + 1) * PING_INTERVAL < 15
            await asyncio.wait_for(moved.wait(), timeout=60)
            assert nc.connected_url.port != port
            assert await ask(responder, b"after") == b"echo:after"   # re-subscribed on the new node
        finally:
            victim.resume()
            await cluster.wait_jetstream(60)
    finally:
        await nc.close()
        await responder.close()
