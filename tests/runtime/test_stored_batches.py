"""A stored round whose commands take several ticks on one lineage commits them as one atomic batch (one ack,
one fsync), not one append after the other: each sequential append is an ack round trip on the event loop,
and with the engine thread holding the GIL each costs a switch interval (the store:true overhead at 32
streams on the H200; docs/PERFORMANCE.md). A round of one tick still goes as a single append (and one of fewer than CHAIN_MIN: a batch costs more)."""
from __future__ import annotations

from aotx.runtime import SharedRuntime
from aotx.runtime.stored_round import CHAIN_MIN
from aotx.stored import (
    CreateResponse,
    FinishResponse,
    ResponseStatus,
    Saved,
    identity_of_key,
)

from .test_batch_append import CountingRecorder

ALICE = identity_of_key("sk-a")


def _item(n: int, text: str) -> dict:
    return {"id": f"msg_{n:048x}", "type": "message", "role": "user", "status": "completed",
            "content": [{"type": "input_text", "text": text}]}


async def test_a_stored_round_of_several_ticks_on_one_lineage_is_one_batch():
    rec = CountingRecorder()
    rt = await SharedRuntime(recorder=rec, progress=False).start()   # the default batch_min_messages (16)
    try:
        big = CreateResponse(f"resp_{1:048x}", 1_800_000_000, "m", [_item(1, "x" * 12000)])
        singles, batches = len(rec.singles), len(rec.batches)
        assert isinstance(await rt.stored.record(ALICE, big), Saved)
        assert len(rec.singles) == singles and len(rec.batches) == batches + 1
        assert CHAIN_MIN <= len(rec.batches[-1]) < 16           # several ticks, fewer than the round minimum
        small = CreateResponse(f"resp_{2:048x}", 1_800_000_000, "m", [_item(2, "hi")])
        assert isinstance(await rt.stored.record(ALICE, small), Saved)
        assert len(rec.singles) == singles + 1 and len(rec.batches) == batches + 1
        for n in (1, 2):   # ended, so that a boot has nothing to close as interrupted
            done = FinishResponse(f"resp_{n:048x}", ResponseStatus.COMPLETED, [])
            assert isinstance(await rt.stored.record(ALICE, done), Saved)
        fresh = await SharedRuntime(recorder=rec, progress=False).start()   # the batches replay as the live state
        assert fresh.state_hash() == rt.state_hash()
        await fresh.stop()
    finally:
        await rt.stop()
