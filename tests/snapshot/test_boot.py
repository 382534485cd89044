"""Boot from a snapshot through the real SharedRuntime on a real nats-server: the same state as a full replay,
and every refusal rule — one warning line naming its reason, then the next older snapshot, then a full replay."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging

import nats.errors
import pytest

from aotx.runtime import ReplayError, SharedRuntime, submit_body
from aotx.runtime.memory_work import input_place, retention
from aotx.runtime.replay import Projector
from aotx.memory import compose_text, memory_object_id
from aotx.snapshot import (SnapshotKeeper, SnapshotPolicy, SnapshotStore, pack_snapshot, snapshot_name,
                           unpack_snapshot)
from aotx.state import Actor, Capacities, Grants, MemoryKind, MutationKind, lineage_for
from aotx.state.execution import InputCompleted, LeaseApplied, OutputAppended, default_lease
from aotx.state.vocab import Execution
from eventlog import EmbeddedNats, StreamSpec, connect
from tests.waiting import wait_until_async

from .compare import fingerprint
from .journal import CTX, INCARNATION, MODEL, SOURCE, rich_log, unit
from .test_store import status

EVERY = 6
_names = iter(range(1, 1000))


def spec() -> StreamSpec:
    n = next(_names)
    return StreamSpec(name=f"SNAPBOOT{n}", subject_prefix=f"sb{n}.j")


def body(principal: str, seq: int, key: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(principal).hex(),
                       "operation_key": f"{key:032x}", "sequence": str(seq), **fields}).encode()


class Writer:
    """Mutations and input executions through a real runtime (the executor's journal calls, no model)."""

    def __init__(self, rt: SharedRuntime) -> None:
        self.rt, self.seq, self.keys, self.ops = rt, {}, iter(range(1, 1 << 30)), {}
        rt.context = CTX   # inputs are admitted for MODEL; the test journals their execution itself

    async def do(self, who: str, kind: MutationKind, space: str | None = None, **fields) -> dict:
        seq = self.seq.get(who, 1)
        out = await submit_body(self.rt, Actor(who, Grants.all()), kind, body(who, seq, next(self.keys), **fields),
                              space)
        assert out.status in (201, 202), out.body
        self.seq[who] = seq + 1
        self.ops[out.body["operation"]] = who
        return out.body

    async def execute(self, who: str, receipt: dict, text: str, *, finish: bool = True) -> None:
        lineage, seq = lineage_for(who), int(receipt["sequence"])
        state = self.rt.state
        slot = state.receipt_slot(lineage, seq)
        events = [LeaseApplied(lineage, default_lease(lineage, seq, slot % 8)),
                  retention(input_place(state, slot), lineage, 1, compose_text(text), unit(seq), None),
                  OutputAppended(lineage, seq, 0, b"out " * 50)]
        if finish:
            events.append(InputCompleted(lineage, seq, Execution.COMPLETED, 5, 50, "stop"))
        assert await self.rt.executions.journal(lineage, events) is None

    async def receipts(self, rt: SharedRuntime) -> dict:
        return {op: (await rt.query("operation", Actor(who, Grants.all()), op=op)).body for op, who in self.ops.items()}


async def workload(w: Writer, rounds: int = 3) -> None:
    await w.do("alice", MutationKind.REGISTER)
    bob = (await w.do("bob", MutationKind.REGISTER))["resource"]
    room = (await w.do("alice", MutationKind.CREATE_SPACE, scope="room"))["resource"]
    con = (await w.do("alice", MutationKind.CREATE_CONVERSATION, room))["resource"]
    first = None
    for i in range(rounds):
        await w.do("alice", MutationKind.SET_MEMBER, room, participant=bob, permissions=["read"] if i % 2 else
                   ["read", "write"])
        receipt = await w.do("alice", MutationKind.INPUT, con, text=f"note {i}", model=MODEL)
        await w.execute("alice", receipt, f"note {i}")
        first = first or receipt
        await w.do("bob", MutationKind.CREATE_SPACE, scope="private")
    text = memory_object_id(lineage_for("alice"), bytes.fromhex(first["operation"].split("-")[2]), MemoryKind.TEXT)
    shared = (await w.do("alice", MutationKind.CREATE_SPACE, scope="instance"))["resource"]
    await w.do("alice", MutationKind.PUBLISH, shared, object=text.hex(), source_version="1")
    await w.do("alice", MutationKind.RETIRE, retry_floor=str(w.seq["alice"] - 2))
    unfinished = await w.do("alice", MutationKind.INPUT, con, text="still running", model=MODEL)
    await w.execute("alice", unfinished, "still running", finish=False)   # a restart interrupts it


async def runtime(url: str, sp: StreamSpec, every: int | None = EVERY, **kw) -> SharedRuntime:
    return await SharedRuntime(url, sp, progress=False, snapshots=SnapshotPolicy(every=every) if every else None,
                               **kw).start()


async def written(url: str, sp: StreamSpec, rounds: int = 3) -> Writer:
    rt = await runtime(url, sp)
    w = Writer(rt)
    await workload(w, rounds)
    # On a busy box the workload's last messages can all land during the first upload (seen: saved 1, covered
    # 6, upload 0.21 s at load ~8); the keeper takes the snapshot due meanwhile when that upload ends, and
    # settled() waits for both. Should the workload write too little for a second one, write on until saved.
    for _ in range(4 * EVERY):
        await rt.snapshots.settled()
        if rt.snapshots.stats.saved >= 2:
            break
        await w.do("bob", MutationKind.CREATE_SPACE, scope="private")
    assert rt.snapshots.stats.saved >= 2
    await rt.stop()
    return w


async def listing(url: str, sp: StreamSpec) -> list:
    store = await SnapshotStore.connect(url, sp.name)
    try:
        return await store.listing()
    finally:
        await store.close()


async def test_boot_from_a_snapshot_is_the_full_replay(nats_url, caplog):
    sp = spec()
    w = await written(nats_url, sp)
    caplog.set_level(logging.INFO, logger="aotx.snapshot")
    fast = await runtime(nats_url, sp)
    try:
        start = fast.snapshots.stats.booted_from
        assert start is not None and start > 0
        line = f"booted from snapshot at seq {start} + {fast.snapshots.stats.tail} tail messages"
        assert line in caplog.messages
        full = await runtime(nats_url, sp, every=None)   # the reference: every message from sequence 1
        try:
            assert fast.state_hash() == full.state_hash()
            assert fingerprint(fast.projector) == fingerprint(full.projector)
            assert await w.receipts(fast) == await w.receipts(full)
            # both go on alike: a new write on the snapshot-booted runtime, then a full replay of it
            w.rt = fast
            await w.do("bob", MutationKind.CREATE_SPACE, scope="room")
        finally:
            await full.stop()
        again = await runtime(nats_url, sp, every=None)
        assert again.state_hash() == fast.state_hash()
        assert await w.receipts(again) == await w.receipts(fast)
        await again.stop()
    finally:
        await fast.stop()
    assert len(await listing(nats_url, sp)) == 2   # the newest two are kept


async def _tamper(url: str, sp: StreamSpec, change) -> tuple[int, int]:
    """Rewrite the newest snapshot's bytes with change(blob); (its covered sequence, the older one's)."""
    newest, older = await listing(url, sp)
    store = await SnapshotStore.connect(url, sp.name)
    try:
        blob = await store.get(newest.name)
        await store.bucket.remove(newest.name)
        name, data = change(newest.name, blob)
        await store.bucket.put(name, data)
    finally:
        await store.close()
    return newest.covered, older.covered


def _refusals(caplog) -> list[tuple[str, str]]:
    return [(r.args[0], r.args[1]) for r in caplog.records
            if r.name == "aotx.snapshot" and r.levelno == logging.WARNING]


@pytest.mark.parametrize("reason, change", [
    ("checksum", lambda name, blob: (name, blob[:-3] + bytes([blob[-3] ^ 0xFF]) + blob[-2:])),
    ("version", lambda name, blob: (name, blob[:8] + b"\x07\x00" + blob[10:])),
    ("format", lambda name, blob: (name, b"not a snapshot at all")),
    ("beyond", lambda name, blob: _moved(name, blob, 10_000)),
])
async def test_a_bad_newest_snapshot_is_refused_and_the_older_one_used(nats_url, caplog, reason, change):
    sp = spec()
    await written(nats_url, sp)
    newest, older = await _tamper(nats_url, sp, change)
    caplog.set_level(logging.INFO, logger="aotx.snapshot")
    rt = await runtime(nats_url, sp, every=None)
    fast = await runtime(nats_url, sp)
    try:
        assert fast.snapshots.stats.booted_from == older
        refused = _refusals(caplog)
        assert len(refused) == 1 and refused[0][1] == reason, refused
        assert fast.state_hash() == rt.state_hash()
    finally:
        await fast.stop()
        await rt.stop()


def _moved(name: str, blob: bytes, by: int) -> tuple[str, bytes]:
    """The same projection claiming `by` more sequences: a snapshot beyond the stream's end."""
    header, body = unpack_snapshot(blob)
    moved = dataclasses.replace(header, covered=header.covered + by, messages=header.messages + by)
    return snapshot_name(header.stream, header.incarnation, moved.covered), pack_snapshot(moved, bytes(body))


async def test_an_unreadable_newest_snapshot_falls_back_to_the_older_one(nats_url, caplog):
    sp = spec()
    await written(nats_url, sp)
    newest, older = await listing(nats_url, sp)
    store = await SnapshotStore.connect(nats_url, sp.name)
    info = await store.bucket._obs.get_info(newest.name)
    await store.bucket.js.purge_stream(store.bucket.stream, subject=f"$O.{store.bucket.bucket}.C.{info.nuid}")
    await store.close()
    caplog.set_level(logging.INFO, logger="aotx.snapshot")
    fast = await runtime(nats_url, sp)
    try:
        assert fast.snapshots.stats.booted_from == older.covered
        assert [reason for _, reason in _refusals(caplog)] == ["unreadable"]
    finally:
        await fast.stop()


async def test_a_snapshot_bucket_left_unanswered_once_is_asked_again(nats_url, caplog, monkeypatch):
    """Runtimes booting at once on a fresh journal: nats-server may leave the bucket's opening unanswered
    while another boot creates it (aotx.log_setup); the keeper asks again instead of replaying it all."""
    sp = spec()
    await written(nats_url, sp)
    real, calls = SnapshotStore.connect.__func__, []

    async def unanswered_once(cls, *args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise nats.errors.TimeoutError
        return await real(cls, *args, **kwargs)

    monkeypatch.setattr(SnapshotStore, "connect", classmethod(unanswered_once))
    caplog.set_level(logging.INFO, logger="aotx.log_setup")
    fast = await runtime(nats_url, sp)
    try:
        assert len(calls) == 2 and fast.snapshots.stats.booted_from is not None
        assert "asking again" in caplog.text
    finally:
        await fast.stop()


async def test_other_capacities_refuse_every_snapshot_and_replay_it_all(nats_url, caplog):
    sp = spec()
    await written(nats_url, sp)
    caplog.set_level(logging.INFO, logger="aotx.snapshot")
    bigger = Capacities(receipts=2048)
    fast = await runtime(nats_url, sp, capacities=bigger)
    full = await runtime(nats_url, sp, every=None, capacities=bigger)
    try:
        assert fast.snapshots.stats.booted_from is None
        assert [reason for _, reason in _refusals(caplog)] == ["capacities", "capacities"]
        assert any(m.startswith("booted by full replay of") for m in caplog.messages)
        assert fast.state_hash() == full.state_hash()
    finally:
        await full.stop()
        await fast.stop()


async def test_a_recreated_stream_refuses_the_old_snapshots_as_foreign(nats_url, caplog):
    sp = spec()
    await written(nats_url, sp)
    nc = await connect(nats_url, name="test")
    await nc.jetstream().delete_stream(sp.name)   # the journal is gone; its snapshot bucket is not
    await nc.close()
    caplog.set_level(logging.INFO, logger="aotx.snapshot")
    rt = await runtime(nats_url, sp)
    try:
        assert rt.snapshots.stats.booted_from is None and rt.projector.messages == 0
        assert [reason for _, reason in _refusals(caplog)] == ["foreign", "foreign"]
        w = Writer(rt)
        await workload(w, rounds=2)   # the new incarnation's first snapshot removes the foreign ones
        await rt.snapshots.settled()
        tag = {e.tag for e in await listing(nats_url, sp)}
        assert len(tag) == 1 and rt.snapshots.stats.saved >= 1
    finally:
        await rt.stop()


async def test_a_stream_that_lost_the_messages_after_every_snapshot_fails_closed(nats_url, caplog):
    sp = spec()
    w = await written(nats_url, sp)
    w.rt = await runtime(nats_url, sp, every=None)
    for _ in range(3):   # messages after the newest snapshot
        await w.do("bob", MutationKind.CREATE_SPACE, scope="private")
    await w.rt.stop()
    nc = await connect(nats_url, name="test")
    js = nc.jetstream()
    info = await js.stream_info(sp.name)
    await js.purge_stream(sp.name, seq=info.state.last_seq)   # keeps only the last message
    await nc.close()
    caplog.set_level(logging.INFO, logger="aotx.snapshot")
    with pytest.raises(ReplayError):
        await runtime(nats_url, sp)
    assert [reason for _, reason in _refusals(caplog)] == ["gap", "gap"]


async def _keep(nats_url: str, messages, policy: SnapshotPolicy = SnapshotPolicy(every=4)) -> int:
    """Feed `messages` (subject, seq, data) to a booted keeper as the runtime would; the snapshots it saved."""
    keeper = SnapshotKeeper(nats_url, None, StreamSpec(name="SNAPORDER", subject_prefix="so.j"), Capacities(),
                            policy)
    p, start = await keeper.boot(status(0, first_seq=0), Projector(SOURCE, INCARNATION))
    assert start == 1
    keeper.booted(p)
    try:
        for subject, seq, data in messages:
            p.feed(subject, seq, data)
            keeper.fed(p, seq)
        await keeper.settled()
        return keeper.stats.saved
    finally:
        await keeper.close()


async def test_snapshots_pause_when_messages_are_applied_out_of_stream_order(nats_url):
    messages = rich_log().messages[:10]
    assert await _keep(nats_url, messages) >= 1
    swapped = [messages[1], messages[0], *messages[2:]]   # a read-back applies 1 after 2 (other lineages)
    assert await _keep(nats_url, swapped) == 0


async def test_a_snapshot_due_during_an_upload_is_taken_when_it_ends(nats_url):
    """Every message lands while the first upload is under way (held here): the snapshot due meanwhile is
    taken once that upload ends, with no message after it, and covers the last one."""
    messages = rich_log().messages[:9]
    keeper = SnapshotKeeper(nats_url, None, StreamSpec(name="SNAPDUE", subject_prefix="sd.j"), Capacities(),
                            SnapshotPolicy(every=4))
    p, _ = await keeper.boot(status(0, first_seq=0), Projector(SOURCE, INCARNATION))
    keeper.booted(p)
    release, save = asyncio.Event(), keeper.store.save

    async def held(*args, **kw):
        await release.wait()
        return await save(*args, **kw)

    keeper.store.save = held
    try:
        for subject, seq, data in messages:
            p.feed(subject, seq, data)
            keeper.fed(p, seq)
        assert keeper.stats.saved == 0          # the first upload (messages 1-4) is held
        release.set()
        await keeper.settled()
        assert keeper.stats.saved == 2 and keeper.stats.covered == messages[-1][1]
    finally:
        await keeper.close()


async def test_snapshots_by_time_alone(nats_url):
    messages = rich_log().messages[:3]
    assert await _keep(nats_url, messages, SnapshotPolicy(every=0, interval=1e-9)) >= 1   # due at once, by time
    assert await _keep(nats_url, messages, SnapshotPolicy(every=0, interval=3600.0)) == 0


async def test_a_journal_hold_on_the_way_then_a_snapshot_boot_is_the_full_replay(tmp_path, caplog):
    """nats-server killed -9 mid-workload: the runtime holds (429), resyncs and lifts once it is back; the
    snapshots taken before and after give the full replay's state."""
    sp = spec()
    server = EmbeddedNats(tmp_path / "nats").start()
    try:
        url = server.client_url()
        rt = await runtime(url, sp, probe_interval=0.1)
        w = Writer(rt)
        try:
            await workload(w, rounds=2)
            server.kill()
            alice = Actor("alice", Grants.all())
            held = body("alice", w.seq["alice"], 10_000, scope="room")
            out = await submit_body(rt, alice, MutationKind.CREATE_SPACE, held)
            assert out.status == 429 and out.body["error"]["type"] == "journal_hold"
            server.start()
            out = await wait_until_async(lambda: submit_body(rt, alice, MutationKind.CREATE_SPACE, held),
                                         "the hold to lift", done=lambda o: o.status != 429)
            assert out.status == 201, out.body
            w.seq["alice"] += 1
            w.ops[out.body["operation"]] = "alice"
            for _ in range(2 * EVERY):
                await w.do("bob", MutationKind.CREATE_SPACE, scope="private")
            await rt.snapshots.settled()
        finally:
            await rt.stop()
        caplog.set_level(logging.INFO, logger="aotx.snapshot")
        fast = await runtime(url, sp)
        full = await runtime(url, sp, every=None)
        try:
            assert fast.snapshots.stats.booted_from is not None
            assert fast.state_hash() == full.state_hash()
            assert fingerprint(fast.projector) == fingerprint(full.projector)
            assert await w.receipts(fast) == await w.receipts(full)
        finally:
            await full.stop()
            await fast.stop()
    finally:
        server.stop()
