"""Restart = replay: the same state hash and every acknowledged receipt identical, also after kill -9."""

from __future__ import annotations

from eventlog import EmbeddedNats
from tests.waiting import wait_until_async

from .harness import fresh_spec, shared_app


async def _workload(p) -> dict[str, dict]:
    """Register two parties, spaces, members, conversations, a retirement; returns op -> receipt."""
    alice, bob = p["alice"], p["bob"]
    receipts: dict[str, dict] = {}

    async def ok(party, path, body):
        status, got = await party.post(path, body)
        assert status == 201, got
        receipts[got["operation"]] = got
        return got

    for party in (alice, bob):
        await party.sync()
        await ok(party, "/participant", party.body())
    bob_id = (await bob.sync()) and (await bob.get("/participant"))[1]["participant"]
    for scope in ("private", "room", "instance"):
        space = (await ok(alice, "/spaces", alice.body(scope=scope)))["resource"]
        await ok(alice, f"/spaces/{space}/conversations", alice.body())
        await ok(alice, f"/spaces/{space}/members", alice.body(participant=bob_id, permissions=["read", "write"]))
    await ok(alice, "/participant/retirements", alice.body(retry_floor="3"))
    await ok(bob, "/spaces", bob.body())
    return receipts


async def _check_live(p, receipts, retired_below: int = 3):
    for op, receipt in receipts.items():
        owner = p["alice"] if op.split("-")[1] == p["alice"].lineage else p["bob"]
        status, got = await owner.get(f"/operations/{op}")
        if owner.name == "alice" and int(receipt["sequence"]) < retired_below:
            assert status == 410
        else:
            assert (status, got) == (200, receipt)


async def test_restart_replays_to_the_same_state(nats_url):
    spec = fresh_spec()
    async with shared_app(nats_url, spec) as (runtime, p, _):
        receipts = await _workload(p)
        live_hash = runtime.state_hash()
        boot1 = runtime.boot_id
    async with shared_app(nats_url, spec) as (runtime, p, _):
        assert runtime.boot_id != boot1
        assert runtime.state_hash() == live_hash
        for party in p.values():
            await party.sync()
        await _check_live(p, receipts)
        # a new write after the restart carries the new boot; old receipts keep theirs
        alice = p["alice"]
        status, new = await alice.post("/spaces", alice.body())
        assert status == 201 and new["save"]["boot"] == runtime.boot_id
        assert {r["save"]["boot"] for r in receipts.values()} == {boot1}
        receipts[new["operation"]] = new
        live_hash = runtime.state_hash()
    async with shared_app(nats_url, spec) as (runtime, p, _):
        assert runtime.state_hash() == live_hash
        for party in p.values():
            await party.sync()
        await _check_live(p, receipts)


async def test_kill_9_of_nats_server(tmp_path):
    spec = fresh_spec()
    server = EmbeddedNats(tmp_path / "nats").start()
    try:
        # the runtime's default journal timeout: a 0.5 s one could turn a slow fsync on a busy box into a hold
        async with shared_app(server.client_url(), spec, probe_interval=0.1) as (runtime, p, _):
            receipts = await _workload(p)
            live_hash = runtime.state_hash()
            server.kill()
            alice = p["alice"]
            body = alice.body()
            status, err = await alice.post("/spaces", body)
            assert status == 429 and err["error"]["type"] == "journal_hold"
            assert runtime.state_hash() == live_hash
            assert (await alice.get("/participant"))[0] == 200  # reads go on
            server.start()
            # each 429 changes nothing: the same mutation again until the hold has lifted
            status, got = await wait_until_async(lambda: alice.post("/spaces", body), "the hold to lift",
                                                 done=lambda answer: answer[0] != 429)
            assert status == 201, got
            receipts[got["operation"]] = got
            live_hash = runtime.state_hash()
            await _check_live(p, receipts)
        server.kill()
        server.start()
        async with shared_app(server.client_url(), spec) as (runtime, p, _):
            assert runtime.state_hash() == live_hash
            for party in p.values():
                await party.sync()
            await _check_live(p, receipts)
    finally:
        server.stop()
