"""Bounded reads of the stream through batched direct gets (nats-server ≥ 2.11, allow_direct).

`read_direct` yields every stored message with seq ≥ `from_seq` (on `subject`, a filter that may
hold wildcards) up to the stream's last sequence when the read began, in order, then stops. No
consumer is made: each request to `$JS.API.DIRECT.GET.<stream>` names a start and a batch size (and
`up_to_seq`, which nats-server 2.15 does not apply to a batch: messages past the end are dropped
here); the server answers on our inbox with the messages (their own headers plus
Nats-Subject and Nats-Sequence) and an end-of-batch status (204 EOB). The next batch is asked for
as soon as one ends, before its messages are handed on, so the server reads and sends while the
caller applies. A batch that does not end within `timeout` raises JournalUnavailable (a read that
stops early must never look complete).

A clustered stream with allow_direct answers direct gets from any of its replicas, and a follower may
not yet hold the leader's last messages: its batch ends early (no more pending, as it sees the
stream). With `dense` (the stream holds every sequence up to `last_seq`: no message deleted, as the
journal's never are) and no subject filter, a read that ends before `last_seq` is such an answer: the
rest is asked for again (briefly spaced) until it arrives, or JournalUnavailable once `timeout` passes
without any. (Seen on the 2-core sandbox: a runtime's read-back of another runtime's messages came
back short; the writer then applied its own later message and skipped them: "expected sequence 2".)
"""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from .errors import JournalUnavailable
from .recorder import StoredMessage

DIRECT_BATCH = 1000
_OWN = frozenset(("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
                  "Nats-Last-Sequence", "Status", "Description"))


class _Batch:
    def __init__(self) -> None:
        self.messages: list[StoredMessage] = []
        self.ended = asyncio.get_running_loop().create_future()
        self.pending = 0   # matching messages after this batch's last (to the stream's end), per its EOB
        self.beyond = False   # it reached past the read's end


async def read_direct(nc: Client, stream: str, last_seq: int, from_seq: int = 1, subject: str | None = None, *,
                      timeout: float = 5.0, batch: int = DIRECT_BATCH, dense: bool = False
                      ) -> AsyncIterator[StoredMessage]:
    seq = max(1, from_seq)
    behind_since: float | None = None   # when a replica behind the leader first answered this read short
    loop = asyncio.get_running_loop()
    if seq > last_seq:
        return
    api = f"$JS.API.DIRECT.GET.{stream}"
    inbox = nc.new_inbox()
    current: list[_Batch] = []

    async def on_msg(msg: Msg) -> None:
        b = current[0]
        headers = msg.headers or {}
        status = headers.get("Status")
        if status is not None:   # 204 EOB ends the batch; 404: nothing (more) up to the end
            b.pending = int(headers.get("Nats-Num-Pending", 0) or 0)
            if not b.ended.done():
                b.ended.set_result(status)
            return
        seq = int(headers["Nats-Sequence"])
        if seq <= last_seq:   # the server does not honour up_to_seq in a batch: what came later is not read
            own = {k: v for k, v in headers.items() if k not in _OWN}
            b.messages.append(StoredMessage(seq, headers["Nats-Subject"], msg.data, own))
        else:
            b.beyond = True

    async def ask(start: int) -> _Batch:
        b = _Batch()
        current[:] = [b]
        request = {"seq": start, "batch": batch, "up_to_seq": last_seq}
        if subject is not None:
            request["next_by_subj"] = subject
        await nc.publish(api, json.dumps(request).encode(), reply=inbox)
        return b

    sub = await nc.subscribe(inbox, cb=on_msg)
    try:
        pending = await ask(seq)
        while pending is not None:
            try:
                status = await asyncio.wait_for(asyncio.shield(pending.ended), timeout)
            except asyncio.TimeoutError:
                raise JournalUnavailable(f"journal unavailable: a direct read from sequence {seq} of {stream} "
                                         f"did not end within {timeout:g} s") from None
            done = pending
            if status not in ("204", "404"):
                raise JournalUnavailable(f"journal unavailable: a direct read of {stream} answered status {status}")
            pending = None
            if done.messages and done.messages[-1].seq < last_seq and done.pending > 0 and not done.beyond:
                seq = done.messages[-1].seq + 1
                pending = await ask(seq)   # the server sends the next batch while this one is applied
            for m in done.messages:
                yield m
            nxt = done.messages[-1].seq + 1 if done.messages else seq
            if pending is None and dense and subject is None and not done.beyond and nxt <= last_seq:
                now = loop.time()   # a replica behind the leader answered: ask for the rest again
                if done.messages or behind_since is None:
                    behind_since = now
                elif now - behind_since > timeout:
                    raise JournalUnavailable(f"journal unavailable: direct reads of {stream} end at sequence "
                                             f"{nxt - 1}, before its last {last_seq}, for {timeout:g} s")
                await asyncio.sleep(0.002)
                seq = nxt
                pending = await ask(seq)
    finally:
        try:
            await sub.unsubscribe()
        except (nats.errors.ConnectionClosedError, nats.errors.BadSubscriptionError):
            pass   # a closed connection has no subscription left to drop
