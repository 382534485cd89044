"""The stored port across the split (issue 15 part 3): a gateway's stored surfaces (RemoteStored) over two
lease-mode runtimes answering on their rpc subjects (aotx.runtime.stored_rpc), with the split users'
NATS permissions, state only (no model: OpenAI Conversations, whose routes need none).

Every stored write goes to the runtime that writes the caller's identity lineage: a gateway that names
the other runtime is answered `not_owner` and re-sends to the holder; a read on the runtime that does not
write the lineage holds every acknowledged write; another bearer token reads the conversation as an
unknown one (404); a journal hold is a 429 and the reads keep working. The SDK's stored Responses,
`previous_response_id` and Idempotency-Key through `aotx gateway --model-surfaces` and `aotx boot` are in
test_split_inputs.py (the one model-backed process test).
"""
from __future__ import annotations

import json

import pytest

from aotx.runtime import GrantedRuntime, RemoteRuntime, RemoteStored, RuntimeRpcServer, SharedRuntime, submit_body
from aotx.runtime.ownership import LeasePolicy
from aotx.runtime.routed import routed
from aotx.runtime_file import load_grants, pack_shared, write_grants
from aotx.state import Actor, Grants, MutationKind, lineage_for
from aotx.stored import wire
from api.config_reload import apply_gateway_config
from api.gateway_config import ensure_dev_config, load_gateway_config
from api.settings import GatewaySettings, token_digest
from api.shared import attach_shared
from api.stored_access import attach_stored
from api.surfaces import conversations
from eventlog import DEFAULT_USER, JournalFull, StreamSpec
from ops.nats_users import GATEWAY_USER, RUNTIME_USER
from ops.shared_stack import stream_spec
from tests.api.fake_service import FakeService, make_app
from tests.runtime.test_split_inputs import split_nats

TOKENS = {"alice": "tok-alice-" + "a" * 32, "bob": "tok-bob-" + "b" * 32}
SHA = "cd" * 32


def gateway_app(remote: RemoteRuntime):
    app = make_app(FakeService())
    app.config["AOTX_SETTINGS"] = GatewaySettings(host="10.0.0.1",   # off loopback: tokens name principals
                                                  token_digests={token_digest(t): n for n, t in TOKENS.items()})
    app.register_blueprint(conversations.blueprint)
    attach_stored(app, RemoteStored(remote))
    return app


def auth(name: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


async def test_stored_state_through_a_gateway_at_the_lineage_owner(tmp_path):
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="st")
    write_grants(tmp_path / "grants", {"alice": ["shared_read"], "bob": ["shared_read"]}, SHA)
    base = stream_spec(rf)
    spec = StreamSpec(name=base.name, subject_prefix=base.subject_prefix, max_bytes=48 * 1024)
    with split_nats(tmp_path / "nats", rf) as nats_server:
        url, runtime_auth = nats_server.url, nats_server.auth(RUNTIME_USER)
        runtimes, servers = [], []
        remote = None
        try:
            for _ in range(2):
                target = GrantedRuntime(SharedRuntime(url, spec, progress=False, nats_auth=runtime_auth,
                                                      probe_interval=0.1, leases=LeasePolicy(ttl=5.0)),
                                        load_grants(tmp_path / "grants"))
                runtimes.append(await target.start())
                servers.append(await RuntimeRpcServer(target, url, rf.name, auth=runtime_auth).start())
            remote = await RemoteRuntime(url, rf.name, SHA, auth=nats_server.auth(GATEWAY_USER)).start()
            client = gateway_app(remote).test_client()

            made = await client.post("/v1/conversations", headers=auth("alice"),
                                     json={"metadata": {"topic": "split"},
                                           "items": [{"type": "message", "role": "user", "content": "first"}]})
            assert made.status_code == 200, await made.get_data(as_text=True)
            cid = (await made.get_json())["id"]
            holder = remote.owners["alice"]   # the runtime that wrote it named itself (`writer`)
            owner = next(t.runtime for t in runtimes if t.runtime.boot_id == holder)
            other = next(t.runtime for t in runtimes if t.runtime.boot_id != holder)
            assert owner.ownership.may_write(lineage_for("alice"))
            assert not other.ownership.may_write(lineage_for("alice"))

            got = await client.get(f"/v1/conversations/{cid}", headers=auth("alice"))
            assert got.status_code == 200 and (await got.get_json())["metadata"] == {"topic": "split"}
            for method in ("GET", "DELETE"):   # another principal: exactly as an unknown id
                foreign = await client.open(f"/v1/conversations/{cid}", method=method, headers=auth("bob"))
                assert foreign.status_code == 404, await foreign.get_data(as_text=True)
                assert (await foreign.get_json())["error"]["code"] == "not_found"

            # a gateway that names the other runtime: not_owner, re-sent to the holder, remembered
            remote.owners["alice"] = other.boot_id
            added = await client.post(f"/v1/conversations/{cid}/items", headers=auth("alice"),
                                      json={"items": [{"type": "message", "role": "user", "content": "second"}]})
            assert added.status_code == 200, await added.get_data(as_text=True)
            assert remote.owners["alice"] == holder and not other.ownership.may_write(lineage_for("alice"))

            # a read on the runtime that does not write the lineage holds every acknowledged write
            remote.owners["alice"] = other.boot_id
            items = await client.get(f"/v1/conversations/{cid}/items?order=asc", headers=auth("alice"))
            assert items.status_code == 200
            assert [i["content"][0]["text"] for i in (await items.get_json())["data"]] == ["first", "second"]
            assert remote.owners["alice"] == other.boot_id   # a read answered elsewhere moves nothing

            # a journal hold: a stored write is 429 and stores nothing; reads keep working
            filler = owner.spec.subject("f" * 32, "filler")
            with pytest.raises(JournalFull):
                for i in range(10_000):
                    await owner.recorder.append(filler, b"x" * 64, msg_id=f"fill-{i}")
            held = await client.post("/v1/conversations", headers=auth("alice"), json={})
            assert held.status_code == 429, await held.get_data(as_text=True)
            assert (await held.get_json())["error"]["code"] == "journal_hold"
            again = await client.get(f"/v1/conversations/{cid}", headers=auth("alice"))
            assert again.status_code == 200 and (await again.get_json())["id"] == cid
        finally:
            if remote is not None:
                await remote.stop()
            for server in servers:
                await server.stop()
            for target in runtimes:
                await target.stop()


def mutation(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


async def test_serve_in_lease_mode_sends_what_another_instance_holds_to_it(tmp_path):
    """`aotx serve --leases`'s ports (aotx.runtime.routed, as ops/serve_cmd.py builds them) on two
    runtimes: a shared command and a stored write for a lineage the other instance holds are sent to it
    (its answer is the client's; this runtime takes no lease); a free lineage is taken and served here."""
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="sv")
    everything = ["shared_read", "shared_write", "shared_manage"]
    write_grants(tmp_path / "grants", {"alice": everything, "bob": everything}, SHA)
    with split_nats(tmp_path / "nats", rf) as nats_server:
        # an instance is runtime and gateway at once: the deployment's one user (the split users may not)
        url, runtime_auth = nats_server.url, nats_server.auth(DEFAULT_USER)
        ports = []
        try:
            for _ in range(2):
                target = GrantedRuntime(SharedRuntime(url, stream_spec(rf), progress=False, nats_auth=runtime_auth,
                                                      leases=LeasePolicy(ttl=5.0)), load_grants(tmp_path / "grants"))
                await target.start()
                ports.append(await routed(target, rf.name, SHA))
            here, there = ports
            alice, bob = Actor("alice", Grants.all()), Actor("bob", Grants.all())
            assert (await submit_body(there, alice, MutationKind.REGISTER, mutation("alice", 1))).status == 201
            out = await submit_body(here, alice, MutationKind.CREATE_SPACE, mutation("alice", 2, scope="private"))
            assert out.status == 201 and out.body["save"]["boot"] == there.runtime.boot_id, out.body
            assert here.forwarded == 1 and not here.runtime.ownership.may_write(lineage_for("alice"))
            assert (await here.query("participant", alice)).body["next_sequence"] == "3"

            app = make_app(FakeService())
            app.config["AOTX_SETTINGS"] = GatewaySettings(
                host="10.0.0.1", token_digests={token_digest(t): n for n, t in TOKENS.items()})
            app.register_blueprint(conversations.blueprint)
            attach_stored(app, here.stored)
            client = app.test_client()
            made = await client.post("/v1/conversations", headers=auth("alice"), json={"metadata": {"at": "there"}})
            assert made.status_code == 200, await made.get_data(as_text=True)
            cid = (await made.get_json())["id"]
            got = await client.get(f"/v1/conversations/{cid}", headers=auth("alice"))
            assert got.status_code == 200 and (await got.get_json())["metadata"] == {"at": "there"}
            assert there.runtime.stored.reads.conversation("alice", cid).metadata == {"at": "there"}
            assert here.stored.forwarded >= 2
            forwarded = here.stored.forwarded
            mine = await client.post("/v1/conversations", headers=auth("bob"), json={})   # a free lineage: here
            assert mine.status_code == 200 and here.stored.forwarded == forwarded
            assert here.runtime.ownership.may_write(lineage_for("bob"))
            foreign = await client.get(f"/v1/conversations/{cid}", headers=auth("bob"))
            assert foreign.status_code == 404

            # SIGHUP's gateway config reaches the requests it forwards (their config_sha256)
            config = load_gateway_config(ensure_dev_config(tmp_path / "cfg")[0])
            attach_shared(app, here, config.shared_principals())
            apply_gateway_config(app, config)
            assert here.remote.config_sha256 == config.config_sha256 != SHA
        finally:
            for port in ports:
                await port.stop()


async def test_serve_in_lease_mode_with_http_workers_sends_what_another_instance_holds_to_it(tmp_path):
    """`aotx serve --leases --http-workers N` (refused before: not built): the main process's runtime side
    (ops.serve_workers.runtime_for_workers) and an HTTP worker's shared port (ops.http_worker.worker_remote,
    from the worker spec's `runtime` and `home`) on two instances. A worker's command for a lineage the
    other instance holds is answered there (its receipt saved by the holder); a free lineage is taken by
    the worker's own instance, every time (it is asked first, not the queue group of both); reads through
    the worker hold the holder's writes; the private app's stored port routes as the single process's."""
    from aotx.runtime.routed import RoutedStored
    from ops.http_worker import worker_remote
    from ops.serve_workers import runtime_for_workers

    names = ["alice", "bob", "carol", "dave", "erin"]
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="sw")
    write_grants(tmp_path / "grants", {n: ["shared_read", "shared_write", "shared_manage"] for n in names}, SHA)
    with split_nats(tmp_path / "nats", rf) as nats_server:
        url, auth = nats_server.url, nats_server.auth(DEFAULT_USER)
        instances, worker = [], None
        try:
            for _ in range(2):
                target = GrantedRuntime(SharedRuntime(url, stream_spec(rf), progress=False, nats_auth=auth,
                                                      leases=LeasePolicy(ttl=5.0)), load_grants(tmp_path / "grants"))
                await target.start()
                instances.append(await runtime_for_workers(target, rf.name, SHA, url, auth))
            here, there = instances
            assert (here.name, here.home) == (rf.name, here.port.runtime.boot_id)
            assert isinstance(here.stored, RoutedStored)
            worker = await worker_remote({"nats_url": url, "runtime": here.name, "home": here.home}, SHA, auth).start()
            actors = {n: Actor(n, Grants.all()) for n in names}
            held = await submit_body(there.port, actors["alice"], MutationKind.REGISTER, mutation("alice", 1))
            assert held.status == 201 and held.body["save"]["boot"] == there.home, held.body
            out = await submit_body(worker, actors["alice"], MutationKind.CREATE_SPACE,
                                    mutation("alice", 2, scope="private"))
            assert out.status == 201 and out.body["save"]["boot"] == there.home, out.body
            assert worker.owners["alice"] == there.home
            assert (await worker.query("participant", actors["alice"])).body["next_sequence"] == "3"
            for n in names[1:]:   # free lineages: taken by the worker's own instance
                out = await submit_body(worker, actors[n], MutationKind.REGISTER, mutation(n, 1))
                assert out.status == 201 and out.body["save"]["boot"] == here.home, (n, out.body)
            assert not there.port.runtime.ownership.may_write(lineage_for("bob"))
        finally:
            if worker is not None:
                await worker.stop()
            for instance in instances:
                await instance.stop()


def test_stored_values_cross_the_wire_as_they_are():
    """Golden bytes of one refusal (aotx.stored.wire), and a command equal, type for type, after a trip."""
    from aotx.stored import AppendResponseEvents, FinishKey, KeyEnd, Reason, StoredRefusal

    refusal = StoredRefusal(Reason.HOLD, "m", "p")
    assert wire.pack(refusal).hex() == ("c7240192ad53746f7265645265667573616c93c70d0292a6526561736f6ea4484f4c44"
                                        "a16da170")
    assert wire.unpack(wire.pack(refusal)) == refusal
    golden = [(FinishKey("responses", "k", 200, {"a": "b"}, KeyEnd.INTERRUPTED),
               "c7360192a946696e6973684b657995a9726573706f6e736573a16bccc881a161a162c7140292a64b6579456e64ab49"
               "4e544552525550544544"),
              (AppendResponseEvents("r", 1, (b"e",)),
               "c7200192b4417070656e64526573706f6e73654576656e747393a17201d60391c40165"),
              ([2 ** 64], "91c714043138343436373434303733373039353531363136")]   # beyond 64 bits: its digits
    for value, packed in golden:
        assert wire.pack(value).hex() == packed and wire.unpack(bytes.fromhex(packed)) == value
    cmd = AppendResponseEvents("resp_x", 2, (b"a", b"b"))
    assert wire.unpack(wire.pack(cmd)) == cmd and isinstance(wire.unpack(wire.pack(cmd)).events, tuple)
    with pytest.raises(wire.WireError):
        wire.unpack(b"\xc7\x04\x01\x92\xa1X\x90")   # a class this wire does not make


def test_serve_lease_flags():
    from ops.cli import build_parser
    from ops.lease_args import lease_policy
    from ops.serve_cmd import lease_problem

    args = build_parser().parse_args(["serve", "--leases", "--lease-ttl", "4", "--lease-election", "0",
                                      "--nats", "nats://127.0.0.1:4222"])
    assert lease_policy(args) == LeasePolicy(ttl=4.0) and lease_problem(args) is None
    args = build_parser().parse_args(["serve", "--leases", "--nats", "nats://127.0.0.1:4222"])
    assert lease_policy(args) == LeasePolicy(ttl=15.0, election=9.0) and lease_problem(args) is None
    short = build_parser().parse_args(["serve", "--leases", "--lease-ttl", "4", "--nats", "nats://127.0.0.1:4222"])
    assert "cannot ride out an election of 9 s" in lease_problem(short)   # the default --lease-election
    assert lease_policy(build_parser().parse_args(["serve"])) is None
    assert "--nats" in lease_problem(build_parser().parse_args(["serve", "--leases"]))
    workers = build_parser().parse_args(["serve", "--leases", "--nats", "nats://h:1", "--http-workers", "2"])
    assert lease_problem(workers) is None   # built: ops.serve_workers.runtime_for_workers
