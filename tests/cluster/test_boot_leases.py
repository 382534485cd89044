"""Two `aotx boot --leases --no-model` runtimes on the 3-node cluster behind one gateway
(RemoteRuntime): every command reaches the runtime that writes its lineage; after one runtime's
SIGKILL the other takes its lineages over within the lease TTL; every acknowledged receipt stays
byte-identical and exact retries answer it (issue 15 parts 2–3, in processes)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from aotx.runtime import GrantedRuntime, RemoteRuntime, RuntimeRpcServer, SharedRuntime, submit_body
from aotx.runtime_file import load_grants, pack_shared, write_grants
from aotx.state import Actor, Grants, MutationKind, lineage_for, receipt_json
from eventlog import DEFAULT_USER, EmbeddedCluster, NatsUser
from ops.nats_users import GATEWAY_USER, RUNTIME_USER, split_users
from ops.shared_stack import stream_spec
from tests.ops.procs import Proc

TTL = 2.0
NAMES = [f"p{i}" for i in range(12)]
CONFIG_SHA = "cd" * 32


def body(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    root = tmp_path_factory.mktemp("leasedeploy")
    rf, _ = pack_shared(root / "runtime.aotxrt", name="lr")
    write_grants(root / "grants", {n: ["shared_read", "shared_write", "shared_manage"] for n in NAMES}, CONFIG_SHA)
    users = (NatsUser(DEFAULT_USER), *split_users(rf.name, stream_spec(rf)))
    with EmbeddedCluster(root / "cluster", users=users) as cluster:
        yield rf, root / "grants", cluster


def boot(rf, grants, cluster: EmbeddedCluster) -> Proc:
    return Proc("boot", "--runtime", str(rf.path), "--nats", cluster.urls, "--nats-user", RUNTIME_USER,
                "--nats-password-file", str(cluster.password_file(RUNTIME_USER)), "--service-grants", str(grants),
                "--no-model", "--leases", "--lease-ttl", str(TTL), "--lease-election", "0",
                ready=r"runtime lr booted .*lease mode, boot ([0-9a-f]+)", timeout=90).start()


async def until_saved(remote, actor, kind, raw, resource=None, within: float = 12 * TTL):
    """The same bytes again while the answer is 'retry later' (a takeover under way)."""
    deadline = time.monotonic() + within
    while True:
        out = await submit_body(remote, actor, kind, raw, resource)
        if out.status not in (429, 503) or time.monotonic() > deadline:
            return out
        await asyncio.sleep(0.1)


async def test_commands_find_their_owner_and_survive_a_runtime_sigkill(deployment):
    rf, grants, cluster = deployment
    procs = [boot(rf, grants, cluster), boot(rf, grants, cluster)]
    boots = [p.match.group(1) for p in procs]
    remote = await RemoteRuntime(cluster.urls, rf.name, CONFIG_SHA, auth=cluster.auth(GATEWAY_USER)).start()
    actors = {n: Actor(n, Grants.all()) for n in NAMES}
    ledger: dict[tuple[str, int], dict] = {}
    try:
        for n in NAMES:
            out = await until_saved(remote, actors[n], MutationKind.REGISTER, body(n, 1))
            assert out.status == 201, out.body
            ledger[(n, 1)] = out.body
        fresh = await RemoteRuntime(cluster.urls, rf.name, CONFIG_SHA, auth=cluster.auth(GATEWAY_USER)).start()
        try:   # a gateway that knows no owner yet: some commands land on the other runtime and are re-routed
            for n in NAMES:
                out = await until_saved(fresh, actors[n], MutationKind.CREATE_SPACE, body(n, 2, scope="private"))
                assert out.status == 201, out.body
                ledger[(n, 2)] = out.body
            assert set(fresh.owners.values()) <= set(boots) and fresh.owners, fresh.owners
        finally:
            await fresh.stop()
        procs[0].kill9()   # mid-load: the other runtime takes its lineages over within the TTL
        started = time.monotonic()

        async def more(n: str) -> None:
            for seq in (3, 4):
                out = await until_saved(remote, actors[n], MutationKind.CREATE_CONVERSATION, body(n, seq),
                                        ledger[(n, 2)]["resource"])
                assert out.status == 201, (n, seq, out.body)
                ledger[(n, seq)] = out.body
        await asyncio.gather(*(more(n) for n in NAMES))
        assert time.monotonic() - started < 12 * TTL
        for (n, seq), receipt in ledger.items():   # exact retries answer the acknowledged receipt
            kind = {1: MutationKind.REGISTER, 2: MutationKind.CREATE_SPACE}.get(seq, MutationKind.CREATE_CONVERSATION)
            raw = body(n, seq, scope="private") if seq == 2 else body(n, seq)
            again = await submit_body(remote, actors[n], kind, raw, None if seq < 3 else ledger[(n, 2)]["resource"])
            assert (again.status, again.body) == (200, receipt), (n, seq)
        replay = await SharedRuntime(cluster.urls, stream_spec(rf), rf.capacities(), progress=False,
                                     nats_auth=cluster.auth()).start()
        try:   # the log holds every acknowledged receipt, byte for byte
            for (n, seq), receipt in ledger.items():
                slot = replay.state.receipt_slot(lineage_for(n), seq)
                assert slot is not None and receipt_json(replay.state, slot) == receipt, (n, seq)
        finally:
            await replay.stop()
    finally:
        await remote.stop()
        for p in procs:
            p.stop()


class HeldAnswers:
    """A GrantedRuntime whose reads wait for `release` once they arrived (`arrived`): a request the runtime
    got and has not answered yet, for as long as the test needs."""

    def __init__(self, target: GrantedRuntime) -> None:
        self.target, self.arrived, self.release = target, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name: str):
        return getattr(self.target, name)

    async def query(self, view: str, actor, **args):
        self.arrived.set()
        await self.release.wait()
        return await self.target.query(view, actor, **args)


async def test_a_runtime_whose_connection_moved_answers_the_request_it_got(deployment):
    """The runtime's connection is on node 1 when a gateway's request arrives; node 1 dies (SIGKILL), the
    connection moves to another node, then the runtime answers. Its answer used to be refused by
    nats-server (`permissions violation for publish to "_INBOX…"`: the split users' runtime may answer
    only through allow_responses, tracked per connection) and the gateway answered 503 after its timeout
    (found by the cluster drill, session 6). Gateways now hear their answers on `aotx.rt.<name>.reply.>`,
    which the runtime user may publish to (ops/nats_users.py): the answer arrives."""
    rf, grants, cluster = deployment
    first, second = (f"nats://127.0.0.1:{port}" for port in cluster.client_ports[:2])
    target = GrantedRuntime(SharedRuntime(cluster.urls, stream_spec(rf), rf.capacities(), progress=False,
                                          nats_auth=cluster.auth(RUNTIME_USER)), load_grants(grants))
    await target.start()
    held = HeldAnswers(target)
    server = await RuntimeRpcServer(held, first, rf.name, auth=cluster.auth(RUNTIME_USER)).start()
    remote = await RemoteRuntime(second, rf.name, CONFIG_SHA, timeout=5, auth=cluster.auth(GATEWAY_USER)).start()
    try:
        asked = asyncio.get_running_loop().create_task(remote.query("participant", Actor("p0", Grants.all())))
        await asyncio.wait_for(held.arrived.wait(), 10)
        cluster.nodes[0].kill()
        deadline = time.monotonic() + 10
        while not (server._nc.is_connected and server._nc.connected_url.port != cluster.client_ports[0]):
            assert time.monotonic() < deadline, "the runtime's connection did not move"
            await asyncio.sleep(0.02)
        held.release.set()
        out = await asked
        assert out.status == 200 and "next_sequence" in out.body, out.body
    finally:
        held.release.set()
        await remote.stop()
        await server.stop()
        await target.stop()
        await cluster.nodes[0].restart_async()
