"""The stored state through the real SharedRuntime on a real nats-server: group-committed ticks, replay = live,
snapshot boot, the hold, boot interrupting what a stop cut, concurrent keys, waiting readers."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import sys

import pytest

from aotx.projection import Projector
from aotx.runtime import SharedRuntime
from aotx.runtime.boot import replay
from aotx.runtime.stored_reads import StoredView
from aotx.stored.port import StoredReads
from aotx.snapshot import SnapshotPolicy
from aotx.stored import (AppendKeyAnswer, BeginKey, CreateConversation, CreateResponse, FinishKey, FinishResponse,
                         KeyEnd, KeyState, Reason, ResponseStatus, Saved, StoredLimits, StoredRefusal, export_stored,
                         identity_lineage, identity_of_key, stored_digest)
from eventlog import JournalFull, StreamSpec
from tests.waiting import wait_until_async

ALICE, KEYED = "alice", identity_of_key("sk-test")
T0 = 1_800_000_000
_names = itertools.count(1)
D1, D2 = hashlib.sha256(b"1").digest(), hashlib.sha256(b"2").digest()


def spec(max_bytes: int | None = None) -> StreamSpec:
    n = next(_names)
    return StreamSpec(name=f"STORED{n}", subject_prefix=f"st{n}.j", max_bytes=max_bytes)


def rid(n: int) -> str:
    return f"resp_{n:048x}"


def msg(n: int, text: str = "hi") -> dict:
    return {"id": f"msg_{n:048x}", "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def start(url: str, sp: StreamSpec, **kw) -> SharedRuntime:
    return await SharedRuntime(url, sp, progress=False, probe_interval=0.05, clock=lambda: T0, **kw).start()


async def ok(rt: SharedRuntime, identity: str, command) -> Saved:
    out = await rt.stored.record(identity, command)
    assert isinstance(out, Saved), out
    return out


def nothing_stored() -> StoredView:
    """The reads of a runtime where nothing was ever stored (same clock, default limits)."""
    return StoredView(lambda: Projector("nothing", "stored"), StoredLimits(), lambda: T0)


async def messages(rt: SharedRuntime) -> int:
    return (await rt.recorder.stream_info()).messages


async def test_generated_events_of_many_streams_share_ticks_and_replay_equals_live(nats_url):
    sp = spec()
    rt = await start(nats_url, sp)
    try:
        for n in range(32):
            await ok(rt, ALICE, CreateResponse(rid(n), T0, "m", [msg(n)]))
        before = await messages(rt)
        delta = b'{"type":"response.output_text.delta","sequence_number":%d,"delta":"tok"}'
        outs = await asyncio.gather(*(rt.stored.append_events(ALICE, rid(n), 0, [delta % 0]) for n in range(32)))
        assert all(isinstance(o, Saved) for o in outs)
        # 32 transfers of two 160-byte records each, in 16-record ticks: 4 appends, not 32
        assert await messages(rt) - before == 4
        for n in range(0, 32, 2):
            await ok(rt, ALICE, FinishResponse(rid(n), ResponseStatus.COMPLETED))
        live = rt.state_hash()
        replayed = await replay(rt.recorder, progress=False)      # the log alone, nothing interrupted
        assert stored_digest(replayed.stored) == stored_digest(rt.projector.stored)
        assert export_stored(replayed.stored) == export_stored(rt.projector.stored)
        for n in range(1, 32, 2):
            await ok(rt, ALICE, FinishResponse(rid(n), ResponseStatus.INCOMPLETE))
        live = rt.state_hash()
    finally:
        await rt.stop()
    again = await start(nats_url, sp)
    try:
        assert again.state_hash() == live
        assert again.stored.reads.response(ALICE, rid(3)).events == 1
        assert again.stored.reads.response(ALICE, rid(3)).status is ResponseStatus.INCOMPLETE
        assert again.stored.reads.response(ALICE, rid(2)).status is ResponseStatus.COMPLETED
        # another identity reads alice's response exactly as an id nobody ever stored
        assert again.stored.reads.response(KEYED, rid(2)) == nothing_stored().response(KEYED, rid(2))
    finally:
        await again.stop()


async def test_a_snapshot_boot_holds_the_stored_state(nats_url):
    sp = spec()
    rt = await start(nats_url, sp, snapshots=SnapshotPolicy(every=3))
    try:
        await ok(rt, KEYED, CreateConversation(f"conv_{1:048x}", T0, {"a": "b"}, [msg(1)]))
        for n in range(4):
            await ok(rt, KEYED, CreateResponse(rid(n), T0, "m", [msg(10 + n)]))
            await ok(rt, KEYED, FinishResponse(rid(n), ResponseStatus.COMPLETED))
        await rt.snapshots.settled()
        assert rt.snapshots.stats.saved >= 1
        live = rt.state_hash()
    finally:
        await rt.stop()
    fast = await start(nats_url, sp, snapshots=SnapshotPolicy(every=3))
    full = await start(nats_url, sp)
    try:
        assert fast.snapshots.stats.booted_from
        assert fast.state_hash() == full.state_hash() == live
    finally:
        await fast.stop()
        await full.stop()


async def test_a_hold_refuses_a_stored_write_changes_nothing_and_reads_go_on(nats_url):
    sp = spec(max_bytes=16 * 1024)
    rt = await start(nats_url, sp)
    try:
        await ok(rt, ALICE, CreateResponse(rid(1), T0, "m", [msg(1)]))
        filler = sp.subject("f" * 32, "filler")
        with pytest.raises(JournalFull):
            for i in range(10_000):
                await rt.recorder.append(filler, b"x" * 64, msg_id=f"fill-{i}")
        before, count = rt.state_hash(), await messages(rt)
        for command in (CreateResponse(rid(2), T0, "m", [msg(2)]), FinishResponse(rid(1), ResponseStatus.COMPLETED),
                        BeginKey("responses", "k", D1)):
            out = await rt.stored.record(ALICE, command)
            assert isinstance(out, StoredRefusal) and out.reason is Reason.HOLD and out.status == 429, out
        assert rt.stored.on_hold()
        assert (rt.state_hash(), await messages(rt)) == (before, count)
        reads = rt.stored.reads                                    # reads keep working
        assert reads.response(ALICE, rid(1)).status is ResponseStatus.IN_PROGRESS
        assert reads.input_items(ALICE, rid(1)).data == [msg(1)]
        assert reads.key(ALICE, "responses", "k", D1).state is KeyState.ABSENT
        assert isinstance(await rt.stored.append_events(ALICE, rid(1), 0, [b"{}"]), StoredRefusal)
        assert (rt.state_hash(), await messages(rt)) == (before, count)
        await rt.recorder.js.purge_stream(sp.name, subject=filler)
        await wait_until_async(lambda: not rt.stored.on_hold(), "the hold to lift after the purge")
        await ok(rt, ALICE, CreateResponse(rid(2), T0, "m", [msg(2)]))
    finally:
        await rt.stop()


async def test_boot_interrupts_what_a_stop_cut_and_never_runs_it_again(nats_url):
    sp = spec()
    rt = await start(nats_url, sp)
    try:
        await ok(rt, KEYED, BeginKey("responses", "retry", D1, bound=rid(1)))
        await ok(rt, KEYED, CreateResponse(rid(1), T0, "m", [msg(1)], background=True))
        await rt.stored.append_events(KEYED, rid(1), 0, [b'{"sequence_number":0}', b'{"sequence_number":1}'])
        await ok(rt, ALICE, BeginKey("chat.completions", "c", D2))
        await ok(rt, ALICE, AppendKeyAnswer("chat.completions", "c", 0, [b"data: {}"]))
    finally:
        await rt.stop()          # as a kill would leave it: nothing finished
    after = await start(nats_url, sp)
    try:
        view = after.stored.reads.response(KEYED, rid(1))
        assert view.status is ResponseStatus.FAILED and "interrupted by a restart" in view.error["message"]
        assert [n for n, _ in after.stored.reads.response_events(KEYED, rid(1)).events] == [0, 1]
        key = after.stored.reads.key(KEYED, "responses", "retry", D1)
        assert (key.state, key.end, key.bound) == (KeyState.FINISHED, KeyEnd.INTERRUPTED, rid(1))
        again = await after.stored.record(KEYED, BeginKey("responses", "retry", D1, bound=rid(2)))
        assert again.key.state is KeyState.FINISHED and again.key.end is KeyEnd.INTERRUPTED   # one answer, ever
        chat = after.stored.reads.key(ALICE, "chat.completions", "c", D2)
        assert (chat.state, chat.chunks, chat.end) == (KeyState.FINISHED, (b"data: {}",), KeyEnd.INTERRUPTED)
        booted, count = after.state_hash(), await messages(after)
    finally:
        await after.stop()
    third = await start(nats_url, sp)
    try:
        assert third.state_hash() == booted and await messages(third) == count   # nothing left to interrupt
    finally:
        await third.stop()


async def test_after_a_kill_9_the_boot_fails_the_cut_response_and_finishes_the_keys_as_interrupted(nats_url):
    from tests.runtime import stored_child as child
    sp = spec()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.runtime.stored_child", nats_url, sp.name,
                                                sp.subject_prefix, stdout=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        assert line == b"READY\n", line
    finally:
        proc.kill()                                             # SIGKILL: nothing is stopped, nothing finished
        await proc.wait()
    after = await SharedRuntime(nats_url, sp, progress=False, probe_interval=0.05).start()   # the child's clock
    try:
        view = after.stored.reads.response(child.KEYED, child.RESPONSE)
        assert view.status is ResponseStatus.FAILED and "interrupted by a restart" in view.error["message"]
        saved = after.stored.reads.response_events(child.KEYED, child.RESPONSE)
        assert ([n for n, _ in saved.events], [e for _, e in saved.events], saved.finished) == \
            ([0, 1], child.EVENTS, True)
        key = after.stored.reads.key(child.KEYED, "responses", "retry", child.D1)
        assert (key.state, key.end, key.status, key.bound) == \
            (KeyState.FINISHED, KeyEnd.INTERRUPTED, 503, child.RESPONSE)
        chat = after.stored.reads.key(child.ALICE, "chat.completions", "c", child.D2)
        assert (chat.state, chat.chunks, chat.end) == (KeyState.FINISHED, (b"data: {}\n\n",), KeyEnd.INTERRUPTED)
        again = await after.stored.record(child.KEYED, BeginKey("responses", "retry", child.D1, bound=rid(2)))
        assert (again.key.state, again.key.bound) == (KeyState.FINISHED, child.RESPONSE)     # never run again
    finally:
        await after.stop()


async def test_concurrent_requests_with_one_key_start_it_once(nats_url):
    rt = await start(nats_url, spec())
    try:
        outs = await asyncio.gather(*(rt.stored.record(KEYED, BeginKey("messages", "same", D1)) for _ in range(8)))
        states = sorted(o.key.state.value for o in outs)
        assert states == ["running"] * 7 + ["started"], states
        other = await rt.stored.record(KEYED, BeginKey("messages", "same", D2))
        assert other.reason is Reason.MISMATCH
    finally:
        await rt.stop()


async def test_a_waiting_reader_wakes_on_new_events_and_on_the_finish(nats_url):
    rt = await start(nats_url, spec())
    try:
        await ok(rt, ALICE, CreateResponse(rid(1), T0, "m", [msg(1)]))
        reader = asyncio.ensure_future(rt.stored.wait_events(ALICE, rid(1), 0, timeout=60))
        await wait_until_async(lambda: len(rt.stored.signals) == 1, "the reader to wait")
        assert not reader.done()
        await rt.stored.append_events(ALICE, rid(1), 0, [b"{}"])
        await asyncio.wait_for(reader, 30)
        await rt.stored.wait_events(ALICE, rid(1), 0, timeout=60)     # already more than 0: at once
        follower = asyncio.ensure_future(rt.stored.wait_events(ALICE, rid(1), 1, timeout=60))
        await wait_until_async(lambda: len(rt.stored.signals) == 1, "the follower to wait")
        await ok(rt, ALICE, FinishResponse(rid(1), ResponseStatus.COMPLETED))
        await asyncio.wait_for(follower, 30)
        await rt.stored.wait_key(ALICE, "completions", "k", 0, timeout=60)   # no such key: at once
        await ok(rt, ALICE, BeginKey("completions", "k", D1))
        waiter = asyncio.ensure_future(rt.stored.wait_key(ALICE, "completions", "k", 0, timeout=60))
        await wait_until_async(lambda: len(rt.stored.signals) == 1, "the key follower to wait")
        assert not waiter.done()
        await ok(rt, ALICE, AppendKeyAnswer("completions", "k", 0, [b"{}"]))
        await asyncio.wait_for(waiter, 30)
        waiter = asyncio.ensure_future(rt.stored.wait_key(ALICE, "completions", "k", 1, timeout=60))
        await wait_until_async(lambda: len(rt.stored.signals) == 1, "the key follower to wait again")
        await ok(rt, ALICE, FinishKey("completions", "k", 200))
        await asyncio.wait_for(waiter, 30)
    finally:
        await rt.stop()


async def test_every_read_of_another_identitys_records_answers_as_for_an_id_nobody_stored(nats_url):
    rt = await start(nats_url, spec())
    conv, item = f"conv_{1:048x}", msg(2)["id"]
    try:
        await ok(rt, ALICE, CreateResponse(rid(1), T0, "m", [msg(1)]))
        await rt.stored.append_events(ALICE, rid(1), 0, [b"{}"])
        await ok(rt, ALICE, FinishResponse(rid(1), ResponseStatus.COMPLETED))
        await ok(rt, ALICE, CreateConversation(conv, T0, {}, [msg(2)]))
        await ok(rt, ALICE, BeginKey("responses", "k", D1))
        reads, nothing = rt.stored.reads, nothing_stored()
        calls = {"response": (rid(1),), "input_items": (rid(1),), "chain": (rid(1),), "response_events": (rid(1), 0),
                 "conversation": (conv,), "conversation_items": (conv,), "conversation_item": (conv, item),
                 "all_conversation_items": (conv,), "key": ("responses", "k", D1)}
        port_reads = {name for name in dir(StoredReads) if not name.startswith("_")}
        assert set(calls) == port_reads                              # every read of the port is checked
        for name, args in calls.items():
            mine, foreign = getattr(reads, name)(ALICE, *args), getattr(reads, name)(KEYED, *args)
            assert not isinstance(mine, StoredRefusal) and getattr(mine, "state", None) is not KeyState.ABSENT, name
            assert foreign == getattr(nothing, name)(KEYED, *args), name
            assert foreign == getattr(nothing, name)(ALICE, *args), name
            assert isinstance(foreign, StoredRefusal) and foreign.reason is Reason.UNKNOWN or \
                foreign.state is KeyState.ABSENT, name
    finally:
        await rt.stop()


async def test_records_are_written_on_their_identitys_lineage(nats_url):
    sp = spec()
    rt = await start(nats_url, sp)
    try:
        await ok(rt, KEYED, CreateResponse(rid(1), T0, "m", [msg(1)]))
        subject = sp.subject(identity_lineage(KEYED).hex(), "tick")
        assert subject in rt.projector.last_subject_seq
        raw = b"".join([m.data async for m in rt.recorder.read(1)])
        assert b"sk-test" not in raw and KEYED.encode() in raw       # the API key itself is never journalled
    finally:
        await rt.stop()


async def test_a_round_of_many_stored_commands_is_applied_without_framing_its_own_ticks_again(nats_url, monkeypatch):
    """32 creates, then 32 finishes, each in one stored round: the ticks hold whole transfers (a stored
    round packs them so), so the writer applies its acknowledged ticks as the transfers it built, never
    by reading its own bytes back through the reassembler, and their events as decided, never decoded
    from those bytes again; a replay of the log gives the same state."""
    import aotx.projection.projector as projector_module

    sp = spec()
    rt = await start(nats_url, sp)
    try:
        decoded: list = []
        real_decode = projector_module.stored_from_body
        monkeypatch.setattr(projector_module, "stored_from_body", lambda body: decoded.append(1) or real_decode(body))
        framed: list = []
        inner = rt.projector.reassembler.feed_message
        rt.projector.reassembler.feed_message = lambda data, position=None: framed.append(position) or \
            inner(data, position)
        params = {"temperature": 0.0, "top_p": 1.0, "max_output_tokens": 32, "tool_choice": "auto", "user": None}
        outs = await asyncio.gather(*(rt.stored.record(ALICE, CreateResponse(
            rid(n), T0, "smollm2-135m-instruct", [msg(2 * n, "Describe a cat in one sentence.")], params=params))
            for n in range(32)))
        assert all(isinstance(o, Saved) for o in outs)
        text = "A cat is a small furry animal that purrs. " * 3
        outs = await asyncio.gather(*(rt.stored.record(ALICE, FinishResponse(
            rid(n), ResponseStatus.COMPLETED, [msg(2 * n + 1, text)], usage={"input_tokens": 30, "output_tokens": 32}))
            for n in range(32)))
        assert all(isinstance(o, Saved) for o in outs)
        assert framed == [] and decoded == []
        replayed = await replay(rt.recorder, progress=False)
        assert len(decoded) == 64                                   # the replay decodes every one
        assert stored_digest(replayed.stored) == stored_digest(rt.projector.stored)
        assert export_stored(replayed.stored) == export_stored(rt.projector.stored)
    finally:
        await rt.stop()


async def test_a_stored_rounds_ticks_are_applied_without_unlocking_the_shared_tables(nats_url, monkeypatch):
    """A tick of stored (and boot control) transfers writes no table of the shared state, so the writer's
    apply of it leaves those tables read-only (no unlock and relock, ~9 µs a message); the shared state's
    hash is unchanged by it and a replay gives the same stored state."""
    from aotx.state import state_hash

    sp = spec()
    rt = await start(nats_url, sp)
    try:
        before = state_hash(rt.projector.state)
        toggled: list = []
        real = type(rt.projector)._writable
        monkeypatch.setattr(type(rt.projector), "_writable", lambda self, on: toggled.append(on) or real(self, on))
        outs = await asyncio.gather(*(rt.stored.record(ALICE, CreateResponse(rid(n), T0, "m", [msg(n)]))
                                      for n in range(8)))
        assert all(isinstance(o, Saved) for o in outs) and toggled == []
        assert state_hash(rt.projector.state) == before and not rt.projector.state.participants.flags.writeable
        replayed = await replay(rt.recorder, progress=False)
        assert stored_digest(replayed.stored) == stored_digest(rt.projector.stored)
    finally:
        await rt.stop()
