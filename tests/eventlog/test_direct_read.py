"""eventlog.direct_read on a clustered stream: a replica behind the leader may answer a direct get.

The stand-in below answers `$JS.API.DIRECT.GET` requests the way nats-server does (each message with
its Nats-Sequence and Nats-Subject headers, then a 204 EOB status with Nats-Num-Pending, or a 404),
from a replica that holds only a prefix of the stream for its first answers and all of it after: a
follower catching up. A real cluster cannot be made to lag on cue; the short read it causes was seen
on the 2-core sandbox (issue 15: a runtime skipped another runtime's messages, "expected sequence 2")."""

from __future__ import annotations

import asyncio
import json

import pytest

from eventlog import JournalUnavailable
from eventlog.direct_read import read_direct


class _Msg:
    def __init__(self, headers: dict, data: bytes = b"") -> None:
        self.headers, self.data = headers, data


class _Sub:
    async def unsubscribe(self) -> None:
        return None


class LaggingReplica:
    """Messages 1..total; the first `stale` answers come from a replica that holds only 1..behind."""

    def __init__(self, total: int, behind: int, stale: int) -> None:
        self.total, self.behind, self.stale, self.asked = total, behind, stale, 0
        self.cb = None

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, inbox: str, cb):
        self.cb = cb
        return _Sub()

    async def publish(self, subject: str, data: bytes, reply: str) -> None:
        request = json.loads(data)
        holds = self.behind if self.asked < self.stale else self.total
        self.asked += 1
        start, n = request["seq"], request["batch"]
        asyncio.get_running_loop().create_task(self._answer(start, n, holds))

    async def _answer(self, start: int, n: int, holds: int) -> None:
        seqs = list(range(start, min(holds, start + n - 1) + 1))
        if not seqs:
            await self.cb(_Msg({"Status": "404", "Description": "Message Not Found"}))
            return
        for seq in seqs:
            await self.cb(_Msg({"Nats-Sequence": str(seq), "Nats-Subject": f"j.{seq % 3}.tick"}, b"m%d" % seq))
        await self.cb(_Msg({"Status": "204", "Description": "EOB", "Nats-Num-Pending": str(holds - seqs[-1]),
                            "Nats-Last-Sequence": str(seqs[-1])}))


async def _read(nc, last: int, **kw) -> list[int]:
    return [m.seq async for m in read_direct(nc, "J", last, 1, timeout=1.0, batch=4, **kw)]


@pytest.mark.parametrize("behind", [0, 3, 6])
async def test_a_read_answered_short_by_a_replica_behind_the_leader_asks_for_the_rest(behind):
    nc = LaggingReplica(total=10, behind=behind, stale=2)
    assert await _read(nc, 10, dense=True) == list(range(1, 11))
    assert nc.asked >= 2


async def test_a_replica_that_never_catches_up_is_journal_unavailable_not_a_complete_read():
    nc = LaggingReplica(total=10, behind=5, stale=10**9)
    got: list[int] = []
    with pytest.raises(JournalUnavailable, match="before its last 10"):
        async for m in read_direct(nc, "J", 10, 1, timeout=0.2, batch=4, dense=True):
            got.append(m.seq)
    assert got == [1, 2, 3, 4, 5]


async def test_a_stream_with_deleted_messages_is_read_as_before():
    nc = LaggingReplica(total=10, behind=6, stale=10**9)
    assert await _read(nc, 10) == list(range(1, 7))   # not dense: what the answer holds, nothing asked again
