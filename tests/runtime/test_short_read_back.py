"""A read-back that comes back short (a replica behind the leader answered, issue 15) never lets the
writer apply its own later message over the hole: the round's commands answer the hold, the next
read-back applies everything in stream order, and an exact retry answers the receipt."""

from __future__ import annotations

import json

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import MemoryRecorder, StreamSpec


class ShortReads:
    """The shared recorder as one runtime sees it: its next `short` reads end before the stream's end."""

    def __init__(self, recorder: MemoryRecorder) -> None:
        self._recorder, self.short = recorder, 0

    def __getattr__(self, name: str):
        return getattr(self._recorder, name)

    async def read(self, from_seq: int = 1, subject: str | None = None):
        if self.short:
            self.short -= 1
            return   # nothing of it yet: a replica behind the leader
        async for msg in self._recorder.read(from_seq, subject):
            yield msg


def body(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


async def test_a_short_read_back_holds_the_round_instead_of_skipping_the_other_writers_messages():
    spec = StreamSpec(name="SHORT", subject_prefix="short.j")
    log = MemoryRecorder("SHORT")
    view = ShortReads(log)
    alice, bob = Actor("alice", Grants.all()), Actor("bob", Grants.all())
    a = await SharedRuntime(recorder=view, spec=spec, progress=False, probe_interval=3600).start()
    b = await SharedRuntime(recorder=log, spec=spec, progress=False, probe_interval=3600).start()
    try:
        assert (await submit_body(a, alice, MutationKind.REGISTER, body("alice", 1))).status == 201
        assert (await submit_body(b, bob, MutationKind.REGISTER, body("bob", 1))).status == 201
        view.short = 1   # a's read-back of bob's messages (between its two acks) comes back empty
        space = body("alice", 2, scope="private")
        out = await submit_body(a, alice, MutationKind.CREATE_SPACE, space)
        assert out.status == 429 and out.body["error"]["type"] == "journal_hold", out.body
        assert a.failed is None and a.state.participant_row(lineage_for("bob")) is None   # nothing skipped over
        out = await submit_body(a, alice, MutationKind.CREATE_SPACE, space)   # the exact retry
        assert out.status == 200 and out.body["sequence"] == "2", out.body
        assert a.state.participant_row(lineage_for("bob")) is not None and not a.hold.active
        fresh = await SharedRuntime(recorder=log, spec=spec, progress=False).start()
        try:
            assert fresh.state_hash() == a.state_hash()
        finally:
            await fresh.stop()
    finally:
        await a.stop()
        await b.stop()
