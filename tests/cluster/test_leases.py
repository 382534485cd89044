"""Lease mode (issue 15 part 2): a lineage is written only by the runtime holding its lease; a live
holder's lineage is refused elsewhere (503 not_owner), a released one is taken at once, a dead
holder's within the TTL, and the takeover reads the log to its end before it decides."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from aotx.runtime import SharedRuntime, submit_body
from aotx.runtime.ownership import LeasePolicy
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import LeaseBucket, StreamSpec, connect

TTL = 2.0
ALL = Grants.all()


def body(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


async def runtime(cluster, spec: StreamSpec) -> SharedRuntime:
    return await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(),
                               leases=LeasePolicy(ttl=TTL)).start()


async def test_a_lease_bucket_grants_one_holder_until_release_or_expiry(cluster):
    nc = await connect(cluster.urls, cluster.auth(), name="t")
    try:
        bucket = await LeaseBucket.connect(nc, "T_OWNERS", ttl=1.0)
        rev = await bucket.acquire("k", b"a")
        assert rev is not None and await bucket.acquire("k", b"b") is None
        assert (await bucket.holder("k"))[0] == b"a"
        rev2 = await bucket.renew("k", b"a", rev)
        assert rev2 is not None and await bucket.renew("k", b"x", rev) is None   # a stale revision loses
        assert await bucket.release("k", rev2) and await bucket.acquire("k", b"b") is not None
        deadline = time.monotonic() + 10
        while await bucket.acquire("k", b"c") is None:   # b stopped renewing: gone after the TTL
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        with pytest.raises(ValueError):
            await LeaseBucket.connect(nc, "T2_OWNERS", ttl=0)
    finally:
        await nc.close()


async def test_one_writer_per_lineage_and_takeover_after_release_or_death(cluster):
    spec = StreamSpec(name="LEASES", subject_prefix="leases.j")
    a, b = await runtime(cluster, spec), await runtime(cluster, spec)
    alice, bob = Actor("alice", ALL), Actor("bob", ALL)
    try:
        assert (await submit_body(a, alice, MutationKind.REGISTER, body("alice", 1))).status == 201
        assert (await submit_body(a, bob, MutationKind.REGISTER, body("bob", 1))).status == 201
        refused = await submit_body(b, alice, MutationKind.CREATE_SPACE, body("alice", 2, scope="private"))
        assert refused.status == 503 and refused.body["error"]["type"] == "not_owner"
        assert a.boot_id in refused.body["error"]["message"]
        # a dies as far as bob's lineage goes: it stops renewing and writing without giving the lease back
        held_since = time.monotonic()
        a.ownership.held.pop(lineage_for("bob"))
        deadline = time.monotonic() + 5 * TTL
        while True:
            out = await submit_body(b, bob, MutationKind.CREATE_SPACE, body("bob", 2, scope="private"))
            if out.status != 503:
                break
            assert time.monotonic() < deadline, out.body
            await asyncio.sleep(0.05)
        assert out.status == 201, out.body     # b read a's writes of bob first: sequence 2 is next
        assert time.monotonic() - held_since >= TTL * 0.5
        again = await submit_body(a, bob, MutationKind.CREATE_SPACE, body("bob", 3, scope="private"))
        assert again.status == 503   # a may not write bob any more
        # a stops cleanly: its leases are given back, b takes alice at once
        await a.stop()
        out = await submit_body(b, alice, MutationKind.CREATE_SPACE, body("alice", 2, scope="private"))
        assert out.status == 201, out.body
        fresh = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth()).start()
        try:
            assert fresh.state_hash() == b.state_hash()
        finally:
            await fresh.stop()
    finally:
        await a.stop()
        await b.stop()


async def test_leases_outlive_a_dropped_journal_connection(cluster):
    """After a write without an ack the runtime drops its journal connection and the next read-back opens
    a fresh one (aotx/runtime/connection.py). The lease bucket was bound to the dropped connection: every
    renewal and acquisition then failed (ConnectionClosedError), the runtime's leases lapsed and every command
    it got answered 500 for good (found by `aotx drill --cluster`, a stream leader's SIGKILL)."""
    spec = StreamSpec(name="LEASEDROP", subject_prefix="leasedrop.j")
    a = await runtime(cluster, spec)
    alice, bob = Actor("alice", ALL), Actor("bob", ALL)
    try:
        assert (await submit_body(a, alice, MutationKind.REGISTER, body("alice", 1))).status == 201
        revision = a.ownership.held[lineage_for("alice")][0]
        await a.writer.connection.drop()   # what a write without an ack does
        out = await submit_body(a, bob, MutationKind.REGISTER, body("bob", 1))   # a lease acquired now
        assert out.status == 201, out.body
        deadline = time.monotonic() + 3 * TTL
        while a.ownership.held.get(lineage_for("alice"), (revision,))[0] == revision:   # renewed since
            assert time.monotonic() < deadline, a.ownership.held
            await asyncio.sleep(0.05)
        out = await submit_body(a, alice, MutationKind.CREATE_SPACE, body("alice", 2, scope="private"))
        assert out.status == 201, out.body
    finally:
        await a.stop()


async def test_a_lease_store_that_does_not_answer_is_retry_later_not_500(cluster):
    """The lease bucket unreachable (its connection closed; a KV request timing out during an election is
    the same to the caller): a command that needs a lease answers 503, changes nothing, and succeeds when
    retried once the bucket answers again."""
    spec = StreamSpec(name="LEASEDOWN", subject_prefix="leasedown.j")
    a = await runtime(cluster, spec)
    carol = Actor("carol", ALL)
    try:
        lease_nc = a.ownership.connection
        await lease_nc.close()
        out = await submit_body(a, carol, MutationKind.REGISTER, body("carol", 1))
        assert out.status == 503 and out.body["error"]["type"] == "lease_unavailable", out.body
        assert "retry" in out.body["error"]["message"]
        assert (await a.query("operation", carol, op="0" * 32)).status != 200
    finally:
        await a.stop()


async def test_a_renewal_that_landed_unacknowledged_does_not_cost_the_lease(cluster):
    """A renewal whose answer was lost (a node's SIGKILL, a timeout) may still have been applied: the lease
    is this boot's at a revision it never heard of. The next renewal, naming the old revision, was refused,
    the runtime dropped the lineage, then could not acquire it (the key exists) and refused its own lineage
    503 not_owner naming its own boot until the lease expired. Now a lease that names this boot is taken
    up at its current revision."""
    spec = StreamSpec(name="LEASESELF", subject_prefix="leaseself.j")
    a = await runtime(cluster, spec)
    dana = Actor("dana", ALL)
    nc = await connect(cluster.urls, cluster.auth(), name="t")
    try:
        assert (await submit_body(a, dana, MutationKind.REGISTER, body("dana", 1))).status == 201
        key = lineage_for("dana").hex()
        kv = await nc.jetstream().key_value(a.ownership.bucket.name)
        entry = await kv.get(key)
        await kv.update(key, entry.value, last=entry.revision)   # the lost renewal, applied: same value
        await a.ownership.renew_all()                            # names the revision before it
        out = await submit_body(a, dana, MutationKind.CREATE_SPACE, body("dana", 2, scope="private"))
        assert out.status == 201, out.body
        assert a.ownership.may_write(lineage_for("dana"))
    finally:
        await nc.close()
        await a.stop()


@pytest.fixture(scope="module")
def service(model_bundle):
    from tests.conftest import started_service
    yield from started_service(model_bundle, max_batch=2, kv_pages=128, default_max_tokens=8)


async def test_a_dead_holders_running_input_ends_interrupted_by_the_taker_never_run_twice(cluster, service):
    """The one input test of the cluster suite: a's input is running when a dies (stops renewing and
    executing); b's orphan sweep takes the lineage within about a TTL and journals it interrupted."""
    spec = StreamSpec(name="LEASEINPUT", subject_prefix="leasein.j")
    a = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), service=service,
                            leases=LeasePolicy(ttl=TTL)).start()
    b = await runtime(cluster, spec)
    carol = Actor("carol", ALL)
    try:
        assert (await submit_body(a, carol, MutationKind.REGISTER, body("carol", 1))).status == 201
        space = (await submit_body(a, carol, MutationKind.CREATE_SPACE, body("carol", 2, scope="private"))).body
        con = (await submit_body(a, carol, MutationKind.CREATE_CONVERSATION, body("carol", 3),
                                 space["resource"])).body["resource"]
        out = await submit_body(a, carol, MutationKind.INPUT, body(
            "carol", 4, text="Count from one to one hundred.", model=service.model_id, max_output_tokens=400,
            temperature=0), con)
        assert out.status == 202, out.body
        op = out.body["operation"]

        async def execution(rt) -> str | None:
            out = await rt.query("operation", carol, op=op)   # None until rt has applied the admission
            return out.body["execution"] if out.status == 200 else None
        deadline = time.monotonic() + 60
        while await execution(a) != "running":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await a.ownership.stop(release=False)   # a dies for carol's lineage: no renewal, no release
        a.executor.abandon(lineage_for("carol"))
        deadline = time.monotonic() + 10 * TTL
        while await execution(b) != "interrupted":
            assert time.monotonic() < deadline, await execution(b)
            await asyncio.sleep(0.05)
        receipt = (await b.query("operation", carol, op=op)).body
        assert "not executed again" in (receipt.get("error") or json.dumps(receipt))
        assert b.ownership.may_write(lineage_for("carol"))
        await until_equal(a, b)
    finally:
        await a.stop()
        await b.stop()


async def until_equal(a, b, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while a.state_hash() != b.state_hash():
        assert time.monotonic() < deadline, "a and b never converged"
        await asyncio.sleep(0.05)


async def test_runtimes_booting_at_once_on_a_fresh_journal_all_boot(cluster):
    """Two lease-mode runtimes that boot at the same moment on a journal nobody created yet both create
    its stream and its lease bucket; nats-server leaves such a request unanswered (or answers "not found")
    while the other's create is under way, and a boot failed with `nats: timeout` (found by the cluster
    drill, session 6). Six such pairs at once (each pair on its own fresh journal): before the fix one
    or more boots failed in 3 of 4 runs; now each asks again (aotx.log_setup) and every one boots."""
    specs = [StreamSpec(name=f"ATONCE{i}", subject_prefix=f"atonce{i}.j") for i in range(6)]

    async def boot(spec: StreamSpec):
        return await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), timeout=1.0,
                                   leases=LeasePolicy(ttl=TTL)).start()
    booted = await asyncio.gather(*(boot(spec) for spec in specs for _ in range(2)), return_exceptions=True)
    try:
        failed = [repr(b) for b in booted if isinstance(b, BaseException)]
        assert not failed, failed
        for i in range(0, len(booted), 2):   # each pair shares its journal and its lease bucket
            a, b = booted[i], booted[i + 1]
            assert (await submit_body(a, Actor("alice", ALL), MutationKind.REGISTER, body("alice", 1))).status == 201
            refused = await submit_body(b, Actor("alice", ALL), MutationKind.CREATE_SPACE,
                                        body("alice", 2, scope="private"))
            assert refused.body["error"]["type"] == "not_owner", refused.body
    finally:
        await asyncio.gather(*(b.stop() for b in booted if not isinstance(b, BaseException)))


async def test_a_held_lease_rides_out_elections_of_its_bucket(cluster):
    """While the lease bucket's stream elects a leader, nats-server drops a renewal sent to it (seen in 3 of
    6 leader step-downs, each an election of milliseconds): the renewal waited its whole 5 s timeout, the
    holder stopped writing its own lineage at its local end (or lost the lease when the server expired it)
    and another runtime could take it. Now an unanswered attempt is sent again every `retry` seconds, so
    the holder rides out an election of up to `rides_out` (here 1 s; the default policy of `--leases`
    rides out 9 s, nats-server's longest election timeout). Four step-downs, each while renewals are
    under way: the holder may write throughout, loses nothing, and the other runtime is refused."""
    spec = StreamSpec(name="LEASEELECT", subject_prefix="leaseelect.j")
    policy = LeasePolicy(ttl=3.0, election=1.0)
    assert policy.rides_out >= 1.0 and policy.renew_every >= policy.retry
    a = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth(), leases=policy).start()
    b = await runtime(cluster, spec)
    alice, lineage = Actor("alice", ALL), lineage_for("alice")
    nc = await connect(cluster.urls, cluster.auth(), name="t")
    lost, unwritable = [], []
    given = a.ownership.on_lost
    a.ownership.on_lost = lambda lin: (lost.append(lin), given(lin))

    async def watch() -> None:
        while True:
            if not a.ownership.may_write(lineage):
                unwritable.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def renewing(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await a.ownership.renew_all()

    watcher = None
    try:
        assert (await submit_body(a, alice, MutationKind.REGISTER, body("alice", 1))).status == 201
        watcher = asyncio.get_running_loop().create_task(watch())   # held from here on
        stepdown = f"$JS.API.STREAM.LEADER.STEPDOWN.KV_{a.ownership.bucket.name}"
        for _ in range(4):
            answers = await asyncio.gather(nc.request(stepdown, b"", timeout=5), renewing(0.6))
            assert json.loads(answers[0].data).get("success"), answers[0].data
        assert not unwritable and not lost, (len(unwritable), lost)
        refused = await submit_body(b, alice, MutationKind.CREATE_SPACE, body("alice", 2, scope="private"))
        assert refused.body["error"]["type"] == "not_owner" and a.boot_id in refused.body["error"]["message"]
        out = await submit_body(a, alice, MutationKind.CREATE_SPACE, body("alice", 2, scope="private"))
        assert out.status == 201, out.body
    finally:
        if watcher is not None:
            watcher.cancel()
        await nc.close()
        await a.stop()
        await b.stop()


def test_a_lease_policy_says_what_election_it_rides_out():
    """The margin against an election is explicit: the renewal cadence follows from the election asked
    for (`--lease-election`), a TTL too short for it is refused, and the defaults ride out 9 s."""
    default = LeasePolicy(election=9.0)
    assert default.ttl == 15.0 and default.rides_out >= 9.0 and default.renew_every == pytest.approx(2.0)
    assert default.writable == pytest.approx(12.0) and "rides out an election of 9 s" in default.describe()
    short = LeasePolicy(ttl=2.0)   # election 0: renewed every ttl/3, and it says what that rides out
    assert short.renew_every == pytest.approx(2 / 3) and short.rides_out == pytest.approx(1.6 - 2 / 3 - 0.4)
    with pytest.raises(ValueError, match="at least 13.1 s"):
        LeasePolicy(ttl=10.0, election=9.0)
    with pytest.raises(ValueError):
        LeasePolicy(ttl=5.0, election=-1.0)
