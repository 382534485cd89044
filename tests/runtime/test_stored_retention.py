"""Retention of the stored state through the real runtime on a real nats-server: the idempotency TTL
(default 24 h) and the response retention (default 30 days) are StoredLimits; reads apply them at
once, the runtime's sweep journals the expiry (at boot and every `sweep_interval` seconds) so that
the room is freed and a replay agrees; what is still running never expires."""

from __future__ import annotations

import hashlib
import itertools

from aotx.runtime import SharedRuntime
from aotx.runtime.boot import replay
from aotx.stored import (BeginKey, CreateResponse, FinishKey, FinishResponse, KeyState, Reason, ResponseStatus,
                         Saved, StoredLimits, stored_digest)
from eventlog import StreamSpec
from tests.waiting import wait_until_async

T0 = 1_800_000_000
D1 = hashlib.sha256(b"1").digest()
_names = itertools.count(1)


def rid(n: int) -> str:
    return f"resp_{n:048x}"


def spec() -> StreamSpec:
    n = next(_names)
    return StreamSpec(name=f"STRET{n}", subject_prefix=f"stret{n}.j")


def runtime(url: str, sp: StreamSpec, clock: list, limits: StoredLimits, sweep_interval: float) -> SharedRuntime:
    rt = SharedRuntime(url, sp, progress=False, probe_interval=0.05, stored_limits=limits, clock=lambda: clock[0])
    rt.stored.sweep_interval = sweep_interval
    return rt


async def ok(rt: SharedRuntime, identity: str, command) -> Saved:
    out = await rt.stored.record(identity, command)
    assert isinstance(out, Saved), out
    return out


def test_the_defaults_keep_a_key_a_day_and_a_response_thirty_days():
    limits = StoredLimits()
    assert (limits.idempotency_ttl, limits.response_ttl) == (24 * 3600, 30 * 24 * 3600)
    assert not limits.key_expired(T0, T0 + 24 * 3600 - 1) and limits.key_expired(T0, T0 + 24 * 3600)
    assert StoredLimits(response_ttl=0).response_expired(T0, T0 + 10 ** 9) is False    # 0: until deleted


async def test_the_running_sweep_journals_the_expiry_and_frees_the_room(nats_url):
    sp, clock = spec(), [float(T0)]
    limits = StoredLimits(responses=2, keys=1, idempotency_ttl=60, response_ttl=600)
    rt = await runtime(nats_url, sp, clock, limits, sweep_interval=0.05).start()
    try:
        await ok(rt, "alice", BeginKey("responses", "k", D1, bound=rid(1)))
        await ok(rt, "alice", CreateResponse(rid(1), T0, "m", []))
        await ok(rt, "alice", FinishResponse(rid(1), ResponseStatus.COMPLETED))
        await ok(rt, "alice", FinishKey("responses", "k", 200))
        await ok(rt, "alice", CreateResponse(rid(2), T0, "m", []))      # never finished: never expires
        full = await rt.stored.record("bob", CreateResponse(rid(3), T0, "m", []))
        assert full.reason is Reason.FULL
        clock[0] = T0 + 60                                              # the key's TTL is over
        assert rt.stored.reads.key("alice", "responses", "k", D1).state is KeyState.ABSENT   # at once, on read
        await wait_until_async(lambda: rt.projector.stored.totals.keys == 0, "the sweep to expire the key")
        assert rt.projector.stored.totals.responses == 2
        clock[0] = T0 + 600                                             # the finished response's too
        assert rt.stored.reads.response("alice", rid(1)).reason is Reason.UNKNOWN
        await wait_until_async(lambda: rt.projector.stored.totals.responses == 1, "the sweep to expire the response")
        assert list(rt.projector.stored.book("alice").responses) == [rid(2)]
        await ok(rt, "bob", CreateResponse(rid(3), T0 + 600, "m", []))   # the room is free again
        assert stored_digest((await replay(rt.recorder, progress=False)).stored) == stored_digest(rt.projector.stored)
    finally:
        await rt.stop()


async def test_a_boot_sweeps_what_expired_while_the_server_was_down(nats_url):
    sp, clock = spec(), [float(T0)]
    limits = StoredLimits(idempotency_ttl=60, response_ttl=600)
    rt = await runtime(nats_url, sp, clock, limits, sweep_interval=0).start()
    try:
        await ok(rt, "alice", BeginKey("responses", "k", D1))
        await ok(rt, "alice", FinishKey("responses", "k", 200))
        await ok(rt, "alice", CreateResponse(rid(1), T0, "m", []))
        await ok(rt, "alice", FinishResponse(rid(1), ResponseStatus.COMPLETED))
    finally:
        await rt.stop()
    clock[0] = T0 + 600
    again = await runtime(nats_url, sp, clock, limits, sweep_interval=0).start()
    try:
        stored = again.projector.stored
        assert (stored.totals.keys, stored.totals.responses, stored.books) == (0, 0, {})
        assert stored_digest((await replay(again.recorder, progress=False)).stored) == stored_digest(stored)
    finally:
        await again.stop()
