"""The split deployment's nats users on a real nats-server: only the runtime writes the journal, only
the gateway sends runtime commands; the gateway keeps the media store; a forged publish by a client
that may not write (or may not connect) changes nothing and the next boot replays as before."""
from __future__ import annotations

import asyncio
import json
import time

import nats.errors
import pytest

from aotx.runtime import SharedRuntime, rpc_subject, submit_body
from aotx.runtime_file import pack_shared
from aotx.state import Grants, MutationKind
from aotx.state.rights import Actor
from eventlog import DEFAULT_USER, EmbeddedNats, MediaStore, NatsAuthorizationError, NatsUser, connect
from ops.nats_users import GATEWAY_USER, RUNTIME_USER, split_users
from ops.shared_stack import stream_spec
from tests.ops.client import SCHEMA


async def _until(check, detail=lambda: "", timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"condition not met: {detail()}"
        await asyncio.sleep(0.02)


async def _boot_hash(srv: EmbeddedNats, spec, register: bool = False) -> tuple[str, int]:
    """Boot a runtime as the runtime user (and register alice); its state hash and the journal's last seq."""
    runtime = SharedRuntime(srv.url, spec, progress=False, nats_auth=srv.auth(RUNTIME_USER))
    await runtime.start()
    try:
        if register:
            alice = Actor("alice", Grants.all())
            me = (await runtime.query("participant", alice)).body
            body = {"schema": SCHEMA, "lineage": me["lineage"], "operation_key": "01" * 16, "sequence": "1"}
            assert (await submit_body(runtime, alice, MutationKind.REGISTER, json.dumps(body).encode())).status == 201
        return runtime.state_hash(), (await runtime.recorder.stream_info()).last_seq
    finally:
        await runtime.stop()


async def test_only_the_runtime_writes_the_journal_and_only_the_gateway_sends_commands(tmp_path):
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="p1")
    spec = stream_spec(rf)
    async with EmbeddedNats(tmp_path / "nats", users=(NatsUser(DEFAULT_USER), *split_users(rf.name, spec))) as srv:
        first_hash, last = await _boot_hash(srv, spec, register=True)
        admin = await connect(srv.url, srv.auth(), name="admin")
        state = (await admin.jetstream().stream_info(spec.name)).state

        seen: list[str] = []

        async def collect(exc: Exception) -> None:
            seen.append(str(exc).lower())  # nats-py lowercases the server's message

        gateway = await connect(srv.url, srv.auth(GATEWAY_USER), name="gw", error_cb=collect)
        forged = spec.subject("0" * 32, "mutation")
        refused = [forged, *(f"$JS.API.STREAM.{verb}.{spec.name}" for verb in ("PURGE", "DELETE", "UPDATE",
                                                                                  "MSG.DELETE"))]
        for subject in refused:
            await gateway.publish(subject, b"forged")
        await gateway.subscribe(rpc_subject(rf.name))  # nor may it pose as the runtime
        await gateway.flush()
        await _until(lambda: all(any(f'publish to "{s.lower()}"' in e for e in seen) for s in refused)
                     and any(f'subscription to "{rpc_subject(rf.name)}"' in e for e in seen), lambda: seen)
        assert all("permissions violation" in e for e in seen)
        with pytest.raises(nats.errors.NoRespondersError):  # commands are the gateway's: allowed, none answers
            await gateway.request(rpc_subject(rf.name), b"", timeout=10)

        seen.clear()
        runtime = await connect(srv.url, srv.auth(RUNTIME_USER), name="rt", error_cb=collect)
        await runtime.publish(rpc_subject(rf.name), b"{}")  # the runtime sends no commands
        await runtime.flush()
        await _until(lambda: any(f'publish to "{rpc_subject(rf.name)}"' in e for e in seen), lambda: seen)

        with pytest.raises(NatsAuthorizationError):  # and a client without credentials does not get in at all
            await connect(srv.url, None, name="anyone")

        # the gateway's media store works with the gateway's permissions
        media = await MediaStore.connect(srv.url, auth=srv.auth(GATEWAY_USER))
        stored = await media.put(b"\x89PNG-bytes", "alice", "image/png")
        assert await media.get(stored.sha256) == b"\x89PNG-bytes"
        assert await media.uploaded_by(stored.sha256, "alice") and not await media.uploaded_by(stored.sha256, "bob")
        await media.close()

        assert (await admin.jetstream().stream_info(spec.name)).state == state  # nothing landed
        for nc in (admin, gateway, runtime):
            await nc.close()
        again_hash, again_last = await _boot_hash(srv, spec)  # the next boot replays, as before
        assert again_hash == first_hash and again_last == last > 0


async def test_the_runtime_user_writes_its_journals_snapshots_and_the_gateway_user_cannot(tmp_path):
    from aotx.snapshot import SnapshotPolicy
    from eventlog import SnapshotBucket

    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="p2")
    spec = stream_spec(rf)
    async with EmbeddedNats(tmp_path / "nats", users=(NatsUser(DEFAULT_USER), *split_users(rf.name, spec))) as srv:
        runtime = SharedRuntime(srv.url, spec, progress=False, nats_auth=srv.auth(RUNTIME_USER),
                                snapshots=SnapshotPolicy(every=1))
        await runtime.start()
        try:
            alice = Actor("alice", Grants.all())
            me = (await runtime.query("participant", alice)).body
            body = {"schema": SCHEMA, "lineage": me["lineage"], "operation_key": "02" * 16, "sequence": "1"}
            assert (await submit_body(runtime, alice, MutationKind.REGISTER, json.dumps(body).encode())).status == 201
            await runtime.snapshots.settled()
            assert runtime.snapshots.stats.saved == 1
        finally:
            await runtime.stop()
        again = SharedRuntime(srv.url, spec, progress=False, nats_auth=srv.auth(RUNTIME_USER),
                              snapshots=SnapshotPolicy(every=1))
        await again.start()
        assert again.snapshots.stats.booted_from == 1
        await again.stop()
        with pytest.raises(nats.errors.TimeoutError):   # the gateway may not even ask about the bucket's stream
            await SnapshotBucket.connect(srv.url, spec.name, auth=srv.auth(GATEWAY_USER), timeout=2.0)
