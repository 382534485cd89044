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
from .nats_client import parse_header_lines
from .recorder import StoredMessage

DIRECT_BATCH = 1000
_OWN = frozenset(("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
                  "Nats-Last-Sequence", "Status", "Description"))


class _Batch:
    def __init__(self) -> None:
        self.messages: list = []   # StoredMessage, or (subject, seq, data) for read_direct_batches
        self.last = 0   # the seq of the last message kept
        self.ended = asyncio.get_running_loop().create_future()
        self.pending = 0   # matching messages after this batch's last (to the stream's end), per its EOB
        self.beyond = False   # it reached past the read's end

    def end(self, status: str, pending: int) -> None:
        self.pending = pending
        if not self.ended.done():
            self.ended.set_result(status)

    def fail(self, why: str) -> None:
        if not self.ended.done():
            self.ended.set_exception(JournalUnavailable(f"journal unavailable: {why}"))


async def read_direct(nc: Client, stream: str, last_seq: int, from_seq: int = 1, subject: str | None = None, *,
                      timeout: float = 5.0, batch: int = DIRECT_BATCH, dense: bool = False
                      ) -> AsyncIterator[StoredMessage]:
    async for messages in _batches(nc, stream, last_seq, from_seq, subject, timeout, batch, dense, False):
        for m in messages:
            yield m


async def read_direct_batches(nc: Client, stream: str, last_seq: int, from_seq: int = 1, *,
                              timeout: float = 5.0, batch: int = DIRECT_BATCH, dense: bool = False
                              ) -> AsyncIterator[list[tuple[str, int, bytes]]]:
    """`read_direct` of the whole stream, a direct get's batch at a time, each message as (subject, seq,
    data) without its headers: a bulk read (boot replay). Where `nc` has `subscribe_raw`
    (eventlog.nats_client.Client) the messages skip nats-py's message path: the answer's header block
    is read for Nats-Sequence and Nats-Subject only (or a status), which is what this read needs."""
    async for messages in _batches(nc, stream, last_seq, from_seq, None, timeout, batch, dense, True):
        yield messages


_SEQ_LINE = b"\r\nNats-Sequence:"
_SUBJECT_LINE = b"\r\nNats-Subject:"
_STATUS_LINE = b"NATS/1.0 "
_CRLF = b"\r\n"


def _seq_subject(headers: bytes) -> tuple[int, str]:
    """A direct get answer's Nats-Sequence and Nats-Subject from its raw header block: the last line of
    each name (the server appends its own after the stored message's), as parse_header_lines reads it
    (value stripped). ValueError where either is missing or the sequence is not a number."""
    i = headers.rfind(_SEQ_LINE)
    j = headers.rfind(_SUBJECT_LINE)
    if i < 0 or j < 0:
        raise ValueError("no Nats-Sequence or Nats-Subject header")
    i += len(_SEQ_LINE)
    j += len(_SUBJECT_LINE)
    e, f = headers.find(_CRLF, i), headers.find(_CRLF, j)
    return int(headers[i:e if e >= 0 else len(headers)].decode("ascii")), \
        headers[j:f if f >= 0 else len(headers)].strip().decode("utf-8", "replace")


def _status(headers: bytes) -> tuple[str | None, int]:
    """(status, Nats-Num-Pending) of a raw header block: its inline status where it has a numeric one
    (as nats-py reads `NATS/1.0 204 EOB`), else None."""
    if not headers.startswith(_STATUS_LINE):
        return None, 0
    line, _, rest = headers.partition(_CRLF)
    status = line[len(_STATUS_LINE):len(_STATUS_LINE) + 3].strip().decode("ascii", "replace")
    if not status.isdigit():
        return None, 0
    return status, int(parse_header_lines(rest).get("Nats-Num-Pending", 0) or 0)


async def _batches(nc: Client, stream: str, last_seq: int, from_seq: int, subject: str | None, timeout: float,
                   batch: int, dense: bool, bulk: bool) -> AsyncIterator[list]:
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
            b.end(status, int(headers.get("Nats-Num-Pending", 0) or 0))
            return
        seq = int(headers["Nats-Sequence"])
        if seq <= last_seq:   # the server does not honour up_to_seq in a batch: what came later is not read
            if bulk:
                b.messages.append((headers["Nats-Subject"], seq, msg.data))
            else:
                own = {k: v for k, v in headers.items() if k not in _OWN}
                b.messages.append(StoredMessage(seq, headers["Nats-Subject"], msg.data, own))
            b.last = seq
        else:
            b.beyond = True

    def on_raw(data: bytes, headers: bytes | None) -> None:   # on_msg's bulk read, from the raw answer
        b = current[0]
        try:
            if headers is not None and headers.startswith(_STATUS_LINE):
                status, pending = _status(headers)
                if status is not None:
                    b.end(status, pending)
                    return
            seq, subj = _seq_subject(headers or b"")
        except ValueError as exc:
            b.fail(f"a direct read of {stream} answered a message without its place ({exc})")
            return
        if seq <= last_seq:
            b.messages.append((subj, seq, data))
            b.last = seq
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

    raw = getattr(nc, "subscribe_raw", None) if bulk else None
    sub = await (raw(inbox, on_raw) if raw is not None else nc.subscribe(inbox, cb=on_msg))
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
            if done.messages and done.last < last_seq and done.pending > 0 and not done.beyond:
                seq = done.last + 1
                pending = await ask(seq)   # the server sends the next batch while this one is applied
            if done.messages:
                yield done.messages
            nxt = done.last + 1 if done.messages else seq
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
