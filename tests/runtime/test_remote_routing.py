"""A gateway's routing to the runtime boot that holds a lineage (RemoteRuntime, lease mode): a request
that reached the holder and got no answer is in doubt, so the gateway does not send it again itself (the
client's exact retry settles it); one that reached no one goes to the queue group at once."""
from __future__ import annotations

import asyncio

import msgpack

from aotx.runtime import RemoteRuntime, parse_submission
from aotx.runtime.rpc import boot_subject, rpc_subject
from aotx.state import Actor, Grants, MutationKind
from eventlog import connect, flush_subscriptions

from .test_group_commit import body

NAME, SHA = "routing", "ab" * 32


async def _stand_ins(nc, name: str, boot_answers: bool):
    """A holder boot that swallows what it receives (it died after reading the request), and the queue
    group, which answers and counts."""
    seen = {"boot": 0, "group": 0}

    async def at_boot(msg) -> None:
        seen["boot"] += 1

    async def at_group(msg) -> None:
        seen["group"] += 1
        await msg.respond(msgpack.packb({"status": 200, "body": {"answered_by": "group"}}, use_bin_type=True))

    if boot_answers:
        await nc.subscribe(boot_subject(name, "deadboot"), cb=at_boot)
    await nc.subscribe(rpc_subject(name), queue="rt", cb=at_group)
    await flush_subscriptions(nc)   # the server has the SUBs (flush() alone may not: eventlog.connect)
    return seen


async def test_an_in_doubt_request_to_the_holder_is_not_sent_again_by_the_gateway(nats_url):
    nc = await connect(nats_url, name="stand-ins")
    remote = await RemoteRuntime(nats_url, NAME, SHA, timeout=0.5).start()
    try:
        seen = await _stand_ins(nc, NAME, boot_answers=True)
        alice = Actor("alice", Grants.all())
        register = parse_submission(MutationKind.REGISTER, body("alice", 1, 1), None)
        remote.owners["alice"] = "deadboot"
        out = await remote.submit(alice, register)
        assert out.status == 503 and out.body["error"]["type"] == "runtime_unavailable", out.body
        assert seen == {"boot": 1, "group": 0}
        assert "alice" not in remote.owners   # the client's exact retry goes to any runtime
        out = await remote.submit(alice, register)
        assert out.status == 200 and seen["group"] == 1
        remote.owners["alice"] = "deadboot"   # a read changes nothing: it is asked again at once
        out = await remote.query("operation", alice, op="x")
        assert out.status == 200 and seen == {"boot": 2, "group": 2}
    finally:
        await remote.stop()
        await nc.close()


async def test_a_request_no_holder_received_goes_to_the_queue_group_at_once(nats_url):
    nc = await connect(nats_url, name="stand-ins")
    remote = await RemoteRuntime(nats_url, NAME + "2", SHA, timeout=0.5).start()
    try:
        seen = await _stand_ins(nc, NAME + "2", boot_answers=False)
        remote.owners["bob"] = "goneboot"
        out = await asyncio.wait_for(remote.query("operation", Actor("bob", Grants.all()), op="x"), 5)
        assert out.status == 200 and out.body == {"answered_by": "group"} and seen["group"] == 1
    finally:
        await remote.stop()
        await nc.close()


async def test_a_new_operations_receipt_routes_the_callers_next_requests_to_the_boot_that_saved_it(nats_url):
    """docs/CONTRACTS.md, "Hardening: read-your-writes after a lease move": the receipt's `save.boot` is the
    lineage's writer; the caller's next commands and own reads go to it, not to the queue group."""
    name = NAME + "3"
    nc = await connect(nats_url, name="stand-ins")
    remote = await RemoteRuntime(nats_url, name, SHA, timeout=0.5).start()
    seen = {"group": 0, "writer": 0}

    async def at_group(msg) -> None:
        seen["group"] += 1
        await msg.respond(msgpack.packb({"status": 201, "body": {"save": {"boot": "writerboot"}}}, use_bin_type=True))

    async def at_writer(msg) -> None:
        seen["writer"] += 1
        await msg.respond(msgpack.packb({"status": 200, "body": {"answered_by": "writer"}}, use_bin_type=True))

    try:
        await nc.subscribe(rpc_subject(name), queue="rt", cb=at_group)
        await nc.subscribe(boot_subject(name, "writerboot"), cb=at_writer)
        await flush_subscriptions(nc)
        alice = Actor("alice", Grants.all())
        out = await remote.submit(alice, parse_submission(MutationKind.REGISTER, body("alice", 1, 1), None))
        assert out.status == 201 and remote.owners == {"alice": "writerboot"}
        out = await remote.query("operation", alice, op="x")
        assert out.body == {"answered_by": "writer"} and seen == {"group": 1, "writer": 1}
    finally:
        await remote.stop()
        await nc.close()
