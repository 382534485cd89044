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
from eventlog.direct_read import read_direct, read_direct_batches


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


class RawLaggingReplica(LaggingReplica):
    """The same answers as raw header blocks, through `subscribe_raw` (eventlog.nats_client.Client's raw
    path): the bulk read takes it where the client has it."""

    def __init__(self, total: int, behind: int, stale: int, headers=None) -> None:
        super().__init__(total, behind, stale)
        self.raw = None
        self.headers = headers or (lambda seq: b"NATS/1.0\r\nNats-Msg-Id: x-%d\r\nNats-Stream: J\r\n"
                                   b"Nats-Subject: j.%d.tick\r\nNats-Sequence: %d\r\n"
                                   b"Nats-Time-Stamp: 2026-12-07T00:00:00Z\r\n\r\n" % (seq, seq % 3, seq))

    async def subscribe_raw(self, inbox: str, handler):
        self.raw = handler
        return _Sub()

    async def _answer(self, start: int, n: int, holds: int) -> None:
        seqs = list(range(start, min(holds, start + n - 1) + 1))
        if not seqs:
            self.raw(b"", b"NATS/1.0 404 Message Not Found\r\n\r\n")
            return
        for seq in seqs:
            self.raw(b"m%d" % seq, self.headers(seq))
        self.raw(b"", b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
                 % (holds - seqs[-1], seqs[-1]))


async def _bulk(nc, last: int, **kw) -> list[tuple[str, int, bytes]]:
    return [m async for b in read_direct_batches(nc, "J", last, 1, timeout=1.0, batch=4, **kw) for m in b]


@pytest.mark.parametrize("behind", [0, 3, 6])
@pytest.mark.parametrize("replica", [LaggingReplica, RawLaggingReplica])
async def test_the_bulk_read_is_the_read_on_either_path(replica, behind):
    want = [(m.subject, m.seq, m.data)
            async for m in read_direct(LaggingReplica(10, behind, 2), "J", 10, 1, timeout=1.0, batch=4, dense=True)]
    assert want == [(f"j.{s % 3}.tick", s, b"m%d" % s) for s in range(1, 11)]
    assert await _bulk(replica(10, behind, 2), 10, dense=True) == want
    assert await _bulk(replica(10, 6, 10**9), 10) == want[:6]   # not dense: what the answer holds
    assert await _bulk(replica(10, 0, 0), 7, dense=True) == want[:7]   # what lies past the read's end: not read


@pytest.mark.parametrize("headers", [
    b"NATS/1.0\r\nNats-Subject: j.1.tick\r\n\r\n",                       # no sequence
    b"NATS/1.0\r\nNats-Sequence: 5\r\n\r\n",                              # no subject
    b"NATS/1.0\r\nNats-Subject: j.1.tick\r\nNats-Sequence: five\r\n\r\n",   # not a number
])
async def test_a_raw_answer_without_its_place_is_journal_unavailable(headers):
    with pytest.raises(JournalUnavailable, match="without its place"):
        await _bulk(RawLaggingReplica(10, 0, 0, headers=lambda seq: headers), 10, dense=True)


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
