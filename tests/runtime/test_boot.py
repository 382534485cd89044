"""Boot (aotx.runtime.boot): replay from a given start (a projector covering a prefix of the log and
the sequence after it) equals a full replay; a start of another stream, or past the log, is refused."""

from __future__ import annotations

import pytest

from aotx.runtime import ReplayError, SharedRuntime, submit_body
from aotx.runtime.boot import BootPoint, replay
from aotx.runtime.replay import Projector
from aotx.state import Actor, Grants, MutationKind, state_hash
from eventlog.memory import MemoryRecorder

from .test_group_commit import body, spc

M = MutationKind


async def written() -> MemoryRecorder:
    """A log of a few lineages' registrations, spaces, conversations and member rows."""
    rec = MemoryRecorder()
    rt = await SharedRuntime(recorder=rec, progress=False).start()
    for who in ("alice", "bob", "carol"):
        a = Actor(who, Grants.all())
        assert (await submit_body(rt, a, M.REGISTER, body(who, 1, 1))).status == 201
        assert (await submit_body(rt, a, M.CREATE_SPACE, body(who, 2, 2, id=f"{2:032x}"))).status == 201
        assert (await submit_body(rt, a, M.CREATE_CONVERSATION, body(who, 3, 3), spc(who, 2))).status == 201
    await rt.stop()
    return rec


def prefix(rec: MemoryRecorder, info, upto: int) -> Projector:
    """The projector of the log's messages up to sequence `upto` (what a snapshot would hold)."""
    proj = Projector(source=info.name, incarnation=info.created.isoformat())
    proj.feed_many((m.subject, m.seq, m.data) for m in rec._messages if m.seq <= upto)
    return proj


async def test_a_boot_from_a_prefix_and_its_tail_equals_a_full_replay():
    rec = await written()
    info = await rec.stream_info()
    for n, upto in enumerate((0, 1, info.last_seq // 2, info.last_seq)):
        async def start(recorder, upto=upto):
            return BootPoint(prefix(rec, await recorder.stream_info(), upto), upto + 1)
        full = await replay(rec, progress=False)
        point = await start(rec)
        proj = await replay(rec, projector=point.projector, from_seq=point.from_seq, progress=False)
        assert (proj.messages, proj.transfers, proj.chains, proj.last_subject_seq) == \
            (full.messages, full.transfers, full.chains, full.last_subject_seq)
        assert state_hash(proj.state) == state_hash(full.state)
        booted = await SharedRuntime(recorder=rec, progress=False, boot_start=start).start()
        fully = await SharedRuntime(recorder=rec, progress=False).start()
        assert booted.state_hash() == fully.state_hash()
        await fully.stop()
        # and it writes on from there as a fully replayed runtime would
        carol = Actor("carol", Grants.all())
        out = await submit_body(booted, carol, M.CREATE_SPACE, body("carol", 4 + n, 4 + n))
        assert out.status == 201, out.body
        await booted.stop()


async def test_a_start_of_another_stream_or_past_the_log_is_refused():
    rec = await written()
    info = await rec.stream_info()
    foreign = dict(projector=Projector(source="OTHER", incarnation=info.created.isoformat()))
    ahead = dict(projector=prefix(rec, info, info.last_seq), from_seq=info.last_seq + 2)
    for start, message in ((foreign, "not of"), (ahead, "the log ends at"), (dict(from_seq=3), "from sequence 1")):
        with pytest.raises(ReplayError, match=message):
            await replay(rec, progress=False, **start)

    async def other_stream(recorder):
        return BootPoint(**foreign)
    with pytest.raises(ReplayError, match="not of"):   # the runtime's boot fails closed on it
        await SharedRuntime(recorder=rec, progress=False, boot_start=other_stream).start()
