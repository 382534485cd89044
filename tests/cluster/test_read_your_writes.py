"""Read-your-writes after a lease move (docs/CONTRACTS.md, "Hardening: read-your-writes after a lease move";
docs/SCALE.md §5), the cluster drill's failure of 2026-12-01 23:24 (/work/notes/drill-fail-2318): alice's
lineage was written by runtime 0, its lease was lost and runtime 1 took it over and acknowledged alice's
`space.members.set` (201, stream sequence 25); her GET /operations/{op} was answered 404 by runtime 0,
whose follower had not applied sequence 25 (a follower's ordered consumer stalls for up to ~15 s after a
node change). Here: two lease-mode runtimes on one nats-server, runtime A serving HTTP in process, its
follower stopped (the stall, made certain), alice's lease moved to B at the right moment, and her write
acknowledged by B. Every read A answers after that must hold the write; a read that cannot catch up
answers 503 `lagging` with Retry-After, never a wrong 404."""
from __future__ import annotations

import json

import pytest

from aotx.runtime import SharedRuntime, submit_body
from aotx.runtime.ownership import LeasePolicy
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import EmbeddedNats, StreamSpec
from tests.shared_api.harness import shared_app

TTL = 2.0


@pytest.fixture(scope="module")
def nats(tmp_path_factory):
    """One nats-server of this module's own (the 503 test pauses it)."""
    with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server


def body(lineage: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage, "operation_key": f"{seq:032x}",
                       "sequence": str(seq), **fields}).encode()


def move_lease(src: SharedRuntime, lineage: bytes):
    """`src` loses the lineage's lease (as a failed renewal does: it stops writing it) and the lease is gone
    from the bucket, so the next command of that lineage on another runtime takes it over at once."""
    revision, _ = src.ownership.held.pop(lineage)
    return src.ownership.bucket.release(lineage.hex(), revision)


async def test_a_read_after_a_lease_move_holds_the_write_the_reader_was_acknowledged_for(nats):
    url = nats.client_url()
    spec = StreamSpec(name="RYW", subject_prefix="ryw.j")
    async with shared_app(url, spec, leases=LeasePolicy(ttl=TTL)) as (a, parties, _client):
        b = await SharedRuntime(url, spec, progress=False, leases=LeasePolicy(ttl=TTL)).start()
        try:
            alice = parties["alice"]
            await alice.sync()
            status, me = await alice.post("/participant", alice.body())   # registered through A
            assert status == 201, me
            status, space = await alice.post("/spaces", alice.body(scope="private"))
            assert status == 201, space
            await a.follower.stop()                        # A hears nothing of B from here on
            await move_lease(a, lineage_for("alice"))      # alice's lease moves: A lost it, B takes it over
            # alice's next command reaches B, which is acknowledged there (201, its stream sequence)
            out = await submit_body(b, Actor("alice", Grants.all()), MutationKind.CREATE_SPACE,
                                    body(alice.lineage, 3, scope="private"))
            assert out.status == 201, out.body
            acked = out.body
            assert acked["save"]["generation"] > a.writer.applied_seq()   # A has not applied it
            # every read of alice that A answers now holds it
            status, got = await alice.get(f"/operations/{acked['operation']}")
            assert (status, got) == (200, acked)
            status, got = await alice.get(f"/spaces/{acked['resource']}")
            assert status == 200, got
            status, got = await alice.get("/participant")
            assert status == 200 and got["next_sequence"] == "4", got
            assert a.state_hash() == b.state_hash()
        finally:
            await b.stop()


async def test_a_read_that_cannot_catch_up_answers_503_lagging_with_retry_after(nats):
    url = nats.client_url()
    spec = StreamSpec(name="RYW503", subject_prefix="ryw503.j")
    async with shared_app(url, spec, leases=LeasePolicy(ttl=TTL)) as (a, parties, client):
        a.read_wait = 0.5
        alice = parties["alice"]
        await alice.sync()
        status, me = await alice.post("/participant", alice.body())
        assert status == 201, me
        await move_lease(a, lineage_for("alice"))   # A does not write alice any more: it cannot vouch alone
        nats.pause()                                # the log answers nothing
        try:
            # a list of spaces is never a read of one's own records (read_fresh.own_records), so it needs the
            # log's end whoever holds alice's lease now (her own participant record was exempt again whenever
            # A held her lease at the read: the flake of session 7)
            resp = await client.get("/aotx/v1/shared/spaces", headers=alice.headers)
            got = await resp.get_json()
            assert resp.status_code == 503 and got["error"]["type"] == "lagging", got
            assert resp.headers["Retry-After"] == "1"
        finally:
            nats.resume()
        status, got = await alice.get("/participant")   # the log answers again: so does the read
        assert status == 200 and got["next_sequence"] == "2", got
