"""The JetStream recorder: the durable log behind the Recorder protocol."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import uuid
from typing import AsyncIterator, Awaitable, Callable, Sequence

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from .connect import NatsAuth, connect
from .connection import OutageLog, close_connection
from .direct_read import read_direct, read_direct_batches
from .errors import AtomicBatchUnsupported, BatchTooLarge, JournalUnavailable, map_publish_error
from .headers import Header
from .publish import AckInbox
from .queue_runs import take_run
from .recorder import MAX_BATCH_MESSAGES, Ack, BatchMessage, StoredMessage, StreamStatus
from .stream import StreamSpec, ensure_stream, replicas_for

ErrorCallback = Callable[[Exception], Awaitable[None]]
_log = logging.getLogger("eventlog")


def _stored(msg: Msg) -> StoredMessage:
    return StoredMessage(
        seq=stream_seq(msg.reply), subject=msg.subject, data=msg.data,
        headers=dict(msg.headers or {}),
    )


_V1_TOKENS = 9   # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>


def stream_seq(reply: str) -> int:
    """A consumed message's stream sequence from its ack subject: `msg.metadata.sequence.stream`
    without the rest of nats-py's Metadata (a datetime, a dataclass and a pair per message: ~10× the
    cost, paid by every message a follower applies). NotJSMessageError where nats-py raises it."""
    tokens = Msg.Metadata._get_metadata_fields(reply)
    return int(tokens[5] if len(tokens) == _V1_TOKENS else tokens[Msg.Ack.StreamSeq])


# seconds between a follow consumer's idle heartbeats: nats-py makes an ordered consumer again once two
# were missed (checked every two), so a consumer lost with its node is back within 2-4 of them (nats-py's
# default of 5 s left a runtime's follower 10-20 s behind after a node change)
FOLLOW_HEARTBEAT = 1.0
_CLOSED = object()   # queued when a followed subscription is unsubscribed (JetStreamSubscription)


class JetStreamSubscription:
    """Follows the stream from a position with an ordered push consumer."""

    def __init__(self, sub) -> None:
        self._sub = sub
        # the nats-py Subscription under the PushSubscription: its pending bytes (which PushSubscription's
        # `_pending_size` property forwards to) set directly
        self._core = getattr(sub, "_sub", sub)
        self._messages = sub.messages
        self._queue = sub._pending_queue   # what nats-py's message iterator takes its messages from
        # nats-py's iterator ends once the subscription is unsubscribed (its future, set then): here a
        # marker queued at that moment wakes a wait on the queue itself, which then ends the same way
        self._messages._unsubscribed_future.add_done_callback(self._unsubscribed)

    def _unsubscribed(self, _future) -> None:
        try:
            self._queue.put_nowait(_CLOSED)
        except asyncio.QueueFull:   # messages are waiting: nobody waits on the queue, and taking stops at _closed
            pass

    def __aiter__(self) -> "JetStreamSubscription":
        return self

    async def __anext__(self) -> StoredMessage:
        # A message is taken from nats-py's subscription queue with the same bookkeeping as nats-py's
        # iterator, but without the task and asyncio.wait it makes for every message (its way of also
        # waiting for an unsubscription, which the marker above stands for here): already waiting, at
        # once; else by awaiting the queue.
        queue, sub = self._queue, self._sub
        if sub._closed:
            raise StopAsyncIteration
        msg = queue.get_nowait() if not queue.empty() else await queue.get()
        queue.task_done()
        if msg is _CLOSED or sub._closed:
            raise StopAsyncIteration
        self._core._pending_size -= len(msg.data)
        return msg if msg.__class__ is StoredMessage else _stored(msg)   # (queued as one: Client.deliver_stored)

    def take_waiting(self, limit: int) -> list[StoredMessage]:
        """Up to `limit` messages already waiting, in order, taken as `__anext__` takes one (none once
        closed): a follower that fell behind applies them as one run (eventlog.queue_runs: the queue's
        bookkeeping once for the run)."""
        if self._sub._closed:
            return []
        out = take_run(self._queue, limit, _CLOSED)
        if out:
            core = self._core
            size = 0
            for i, msg in enumerate(out):
                if msg.__class__ is not StoredMessage:   # (nats-py's Msg: a message our Client left to nats-py)
                    msg = out[i] = _stored(msg)
                size += len(msg.data)
            core._pending_size -= size
        return out

    async def close(self) -> None:
        try:
            await self._sub.unsubscribe()
        except (nats.errors.ConnectionClosedError, nats.errors.BadSubscriptionError):
            pass

    async def __aenter__(self) -> "JetStreamSubscription":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class JetStreamRecorder:
    """Use `await JetStreamRecorder.connect(url, spec)`; it creates or updates the stream.

    Atomic batches: the stream is created, or an existing one updated, with `allow_atomic` (the
    spec's default), so a stream made before batches existed is upgraded on connect. Where the
    server does not report it afterwards (a server older than 2.12, or a spec without it),
    `atomic_batches` is False and append_batch refuses (AtomicBatchUnsupported): the caller appends
    message by message. A batch refused with "atomic publish is disabled" (another writer updated
    the stream without it) turns `atomic_batches` off the same way."""

    batch_limit = MAX_BATCH_MESSAGES

    def __init__(self, nc: Client, spec: StreamSpec, *, owns_connection: bool, timeout: float) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=timeout)
        self.spec = spec
        self.timeout = timeout
        self._owns_connection = owns_connection
        self.atomic_batches = False   # set from the stream's config once ensured
        # appends await their acks on one inbox (eventlog.publish) where the connection is ours (it has
        # subscribe_replies); on any other nats-py connection through js.publish
        self._acks = AckInbox(nc, spec.name, timeout) if hasattr(nc, "subscribe_replies") else None

    async def _ensure(self) -> None:
        info = await ensure_stream(self.js, self.spec, replicas_for(self.nc))
        self.atomic_batches = bool(getattr(info.config, "allow_atomic", False))
        if self._acks is not None:
            await self._acks.start()

    @classmethod
    async def connect(
        cls, url: str, spec: StreamSpec | None = None, *, timeout: float = 5.0,
        error_cb: ErrorCallback | None = None, name: str = "aotx-eventlog", auth: NatsAuth | None = None,
        outage: OutageLog | None = None,
    ) -> "JetStreamRecorder":
        """Connection errors go to `error_cb`, else to `outage` (an OutageLog the caller keeps across
        reconnections of its own, so that one outage is one line however often it connects anew),
        else to a fresh OutageLog. A failed write still surfaces as JournalUnavailable from append."""
        outage = outage or OutageLog(_log, name, url)
        nc = await connect(
            url, auth, name=name, error_cb=error_cb or outage.error, reconnected_cb=outage.reconnected,
            max_reconnect_attempts=-1, reconnect_time_wait=0.2,
        )
        await outage.reconnected()   # a fresh connection that works ends the caller's outage too
        rec = cls(nc, spec or StreamSpec(), owns_connection=True, timeout=timeout)
        try:
            await rec._ensure()
        except BaseException:
            await close_connection(nc, name=name)
            raise
        return rec

    @classmethod
    async def attach(cls, nc: Client, spec: StreamSpec | None = None, *, timeout: float = 5.0) -> "JetStreamRecorder":
        """Use a connection someone else owns (close() leaves it open)."""
        rec = cls(nc, spec or StreamSpec(), owns_connection=False, timeout=timeout)
        await rec._ensure()
        return rec

    async def append(
        self, subject: str, payload: bytes, msg_id: str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> Ack:
        if self._acks is not None:
            return await self.append_sent(await self.send_append(subject, payload, msg_id, expected_last_subject_seq),
                                          subject, expected_last_subject_seq)
        headers: dict[str, str] = {}
        if msg_id is not None:
            headers[Header.MSG_ID.value] = msg_id
        if expected_last_subject_seq is not None:
            headers[Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value] = str(int(expected_last_subject_seq))
        try:
            ack = await self.js.publish(subject, payload, headers=headers or None, stream=self.spec.name)
        except Exception as exc:  # mapped in exactly one place: errors.map_publish_error
            mapped = map_publish_error(exc, subject, expected_last_subject_seq)
            if mapped is None:
                raise
            raise mapped from exc
        return Ack(stream=ack.stream, seq=ack.seq, duplicate=bool(ack.duplicate))

    @property
    def sends_appends(self) -> bool:
        """Whether `send_append` / `append_sent` may be used (the lean path: appends in flight with no
        task each, sent one after the other, then awaited)."""
        return self._acks is not None

    async def send_append(self, subject: str, payload: bytes, msg_id: str | None = None,
                          expected_last_subject_seq: int | None = None) -> asyncio.Future:
        """`append`'s first half: send the message now; its ack is `append_sent(the result, …)`. Raises
        what append raises for a message that could not be sent."""
        assert self._acks is not None, "send_append needs sends_appends"
        try:
            return await self._acks.send(subject, payload, msg_id, expected_last_subject_seq)
        except Exception as exc:  # mapped in exactly one place: errors.map_publish_error
            mapped = map_publish_error(exc, subject, expected_last_subject_seq)
            if mapped is None:
                raise
            raise mapped from exc

    async def append_sent(self, sent: asyncio.Future, subject: str,
                          expected_last_subject_seq: int | None = None) -> Ack:
        """`append`'s second half: the Ack of a message `send_append` sent (the same subject and guard),
        or what append raises for its answer."""
        assert self._acks is not None, "append_sent needs sends_appends"
        try:
            stream, seq, duplicate = await self._acks.result(sent)
        except Exception as exc:  # mapped in exactly one place: errors.map_publish_error
            mapped = map_publish_error(exc, subject, expected_last_subject_seq)
            if mapped is None:
                raise
            raise mapped from exc
        return Ack(stream=stream, seq=seq, duplicate=duplicate)

    async def append_batch(self, messages: Sequence[BatchMessage]) -> list[Ack]:
        """One atomic batch (ADR-50): every message but the last is published without a reply, the
        last with the commit header as a request; the one ack names the last sequence and the count."""
        n = len(messages)
        if n == 0:
            return []
        if not self.atomic_batches:
            raise AtomicBatchUnsupported(f"stream {self.spec.name} does not allow atomic publish")
        if n > self.batch_limit:
            raise BatchTooLarge(f"{n} messages in one batch; at most {self.batch_limit}")
        guarded = [m.subject for m in messages if m.expected_last_subject_seq is not None]
        if len(guarded) != len(set(guarded)):
            raise ValueError("an atomic batch guards a subject at most once (its first message there)")
        batch_id = uuid.uuid4().hex
        stream = self.spec.name
        try:
            for i, m in enumerate(messages, 1):
                headers = {Header.BATCH_ID.value: batch_id, Header.BATCH_SEQUENCE.value: str(i),
                           Header.EXPECTED_STREAM.value: stream}
                if m.msg_id is not None:
                    headers[Header.MSG_ID.value] = m.msg_id
                if m.expected_last_subject_seq is not None:
                    headers[Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value] = str(int(m.expected_last_subject_seq))
                if i < n:
                    await self.nc.publish(m.subject, m.payload, headers=headers)
                else:
                    headers[Header.BATCH_COMMIT.value] = "1"
                    reply = await self.nc.request(m.subject, m.payload, timeout=self.timeout, headers=headers)
            resp = json.loads(reply.data)
            if "error" in resp:
                raise nats.js.errors.APIError.from_error(resp["error"])
        except Exception as exc:  # mapped in exactly one place: errors.map_publish_error
            if isinstance(exc, nats.errors.NoRespondersError):
                exc = nats.js.errors.NoStreamResponseError()
            mapped = map_publish_error(exc, None, None)
            if mapped is None:
                raise
            if isinstance(mapped, AtomicBatchUnsupported):
                self.atomic_batches = False
            raise mapped from exc
        if resp.get("batch") != batch_id or resp.get("count") != n or resp.get("stream") != stream:
            # not an atomic batch's ack (a server that ignored the batch headers): what landed is unknown
            self.atomic_batches = False
            raise JournalUnavailable(f"journal unavailable: batch {batch_id} answered {resp!r:.200}")
        last = int(resp["seq"])
        return [Ack(stream=stream, seq=last - n + i) for i in range(1, n + 1)]

    async def read(self, from_seq: int = 1, subject: str | None = None) -> AsyncIterator[StoredMessage]:
        """Through batched direct gets (eventlog.direct_read), up to the last message stored now."""
        info = await self.js.stream_info(self.spec.name)
        st = info.state   # dense: every sequence from first to last is stored (none deleted)
        dense = st.messages == st.last_seq - st.first_seq + 1
        async for msg in read_direct(self.nc, self.spec.name, st.last_seq, max(from_seq, st.first_seq), subject,
                                     timeout=self.timeout, dense=dense):
            yield msg

    async def read_batches(self, from_seq: int = 1) -> AsyncIterator[list[tuple[str, int, bytes]]]:
        """`read` of the whole stream as lists of (subject, seq, data), a direct get's batch at a time."""
        info = await self.js.stream_info(self.spec.name)
        st = info.state
        dense = st.messages == st.last_seq - st.first_seq + 1
        async for messages in read_direct_batches(self.nc, self.spec.name, st.last_seq,
                                                  max(from_seq, st.first_seq), timeout=self.timeout, dense=dense):
            yield messages

    async def subscribe(self, from_seq: int = 1, subject: str | None = None, *,
                        headers: bool = True) -> JetStreamSubscription:
        """`headers=False`: its messages' `headers` are left empty (a reader of subject, seq and data only:
        the follower), which our Client then need not parse."""
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, from_seq))
        sub = await self.js.subscribe(
            subject or self.spec.subjects[0], stream=self.spec.name, ordered_consumer=True, config=config,
            idle_heartbeat=FOLLOW_HEARTBEAT,
        )
        deliver = getattr(self.nc, "deliver_stored", None)   # our Client (eventlog.nats_client): StoredMessages queued
        if deliver is not None:
            deliver(sub._sub, headers)
        return JetStreamSubscription(sub)

    async def last_subject_seq(self, subject: str) -> int:
        """The stream sequence of the last message on `subject` (0: none), read from the stream now."""
        try:
            msg = await self.js.get_last_msg(self.spec.name, subject, direct=True)
        except nats.js.errors.NotFoundError:
            return 0
        return int(msg.seq)

    async def stream_info(self) -> StreamStatus:
        info = await self.js.stream_info(self.spec.name)
        created = info.created or datetime.datetime.fromtimestamp(0, datetime.timezone.utc)
        max_bytes = info.config.max_bytes
        return StreamStatus(
            name=info.config.name, created=created, messages=info.state.messages,
            bytes=info.state.bytes, first_seq=info.state.first_seq, last_seq=info.state.last_seq,
            max_bytes=None if max_bytes is None or max_bytes < 0 else max_bytes,
        )

    async def purge(self) -> None:
        """Operator action: drop every message (sequences keep counting). Frees space; lifts a hold."""
        await self.js.purge_stream(self.spec.name)

    async def close(self) -> None:
        """Close an owned connection within a bound, also when nats-server is gone."""
        if self._owns_connection:
            await close_connection(self.nc, name="aotx-eventlog")
