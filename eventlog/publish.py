"""JetStream publishes whose acks come back on one inbox: the append path without nats-py's request.

nats-py's `js.publish` is a request: per message a NUID token, a future with a done callback,
`asyncio.wait_for` with a timer of its own, the reply built into a `Msg` (a header dict) and handed
through the inbox subscription's queue and task to a callback, then the ack's JSON into a `PubAck`
dataclass. `AckInbox.publish` writes the very bytes nats-py writes for `js.publish(subject, payload,
headers=…, stream=…)` (the HPUB line, the header block in the same order, the payload: tested byte
for byte) with a reply subject on ONE wildcard inbox of its own (`<inbox prefix>.<nuid>.<n>`, n a
counter), read by a raw handler (eventlog.nats_client `subscribe_replies`): the reply's subject finds
its future in a dict, and the header block is parsed only when there is one (an ack has none).

Timeouts: the pending publishes are kept in the order sent, each with its deadline (sent + timeout;
one timeout per inbox, so the deadlines are in that order too); one timer at the oldest deadline fails
what is due with nats.errors.TimeoutError and is set again for the next one (with a steady flow of
acks it fires about once a timeout, not once a message).

A failed publish raises exactly what `js.publish` raises for it, so that errors.map_publish_error maps
it as before: an invalid subject BadSubjectError, a draining or closed connection
ConnectionDrainingError / ConnectionClosedError, the outbound buffer full while reconnecting
OutboundBufferLimitError, a payload over the server's limit MaxPayloadError, an inline 503 status (no
stream listens) NoStreamResponseError, an error ack `APIError.from_error` (BadRequestError for a wrong
last sequence, 10071; ServiceUnavailableError; …), a reply that is not an ack's JSON what json.loads
raises, no answer within the timeout nats.errors.TimeoutError. A publish whose connection dropped
while it waited fails at its deadline, as nats-py's does (an ack the server sent went to the old
connection); one buffered while reconnecting is sent once the connection is back, after the inbox's
subscription is made again (nats-py re-subscribes every subscription first), and its ack arrives.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Optional

import msgspec
import nats.errors
import nats.js.errors
from nats.js.api import PubAck

_SUBJECT_INVALID = re.compile(r"[ \t\r\n]")   # nats-py's _SUBJECT_INVALID_RE (a publish's subject check)
_VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})   # nats-py's header value cleaning
_HEAD = "NATS/1.0\r\n"
_CRLF = b"\r\n"
_STATUS = "Status"
_NO_RESPONDERS = "503"
_decode_json = msgspec.json.Decoder().decode   # an ack's JSON in C (json.loads: ~7 µs an ack in the runtime)
MAX_SUBJECTS = 4096   # subjects remembered as valid (a journal writes a few per lineage)


def header_value(value: str) -> str:
    """A header value as nats-py writes it: stripped, CR and LF turned into spaces."""
    return value.strip().translate(_VALUE_NEWLINES)


class AckInbox:
    """Publishes to the JetStream stream `stream` awaiting their acks on one inbox of connection `nc`
    (an eventlog.nats_client.Client: it has `subscribe_replies`). Use from the connection's loop."""

    def __init__(self, nc: Any, stream: str, timeout: float) -> None:
        self.nc = nc
        self.stream = stream
        self.timeout = float(timeout)
        self._stream_line = f"Nats-Expected-Stream: {header_value(stream)}\r\n\r\n"
        self._pending: dict[bytes, tuple[asyncio.Future, float]] = {}   # reply subject → (future, deadline)
        self._prefix: Optional[str] = None   # "<inbox prefix>.<nuid>.", once subscribed
        self._lock = asyncio.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._n = 0
        self._valid: set[str] = set()

    @property
    def pending(self) -> int:
        """Publishes awaiting their ack (or their deadline)."""
        return len(self._pending)

    async def start(self) -> None:
        """Subscribe the inbox (done by the first publish where not called before)."""
        async with self._lock:
            if self._prefix is not None:
                return
            nc = self.nc
            prefix = nc._inbox_prefix[:]
            prefix.extend(b".")
            prefix.extend(nc._nuid.next())
            prefix.extend(b".")
            self._loop = asyncio.get_running_loop()
            await nc.subscribe_replies(prefix.decode() + "*", self._on_reply)
            self._prefix = prefix.decode()

    async def publish(self, subject: str, payload: bytes, msg_id: Optional[str] = None,
                      expected_last_subject_seq: Optional[int] = None) -> tuple[str, int, bool]:
        """(stream, seq, duplicate) of the ack; raises what js.publish raises (see the module's note)."""
        return await self.result(await self.send(subject, payload, msg_id, expected_last_subject_seq))

    async def send(self, subject: str, payload: bytes, msg_id: Optional[str] = None,
                   expected_last_subject_seq: Optional[int] = None) -> asyncio.Future:
        """Send the publish now (written to the socket by nats-py's flusher, in the order sent); the future
        of its reply, for `result`. Several sends, then their results: several publishes in flight with
        no task each. Raises what js.publish raises before anything is sent."""
        nc = self.nc
        if subject not in self._valid:   # request() and publish() check the subject first
            if not subject or _SUBJECT_INVALID.search(subject):
                raise nats.errors.BadSubjectError
            if len(self._valid) < MAX_SUBJECTS:
                self._valid.add(subject)
        if nc.is_draining_pubs:
            raise nats.errors.ConnectionDrainingError
        if self._prefix is None:
            await self.start()
        if nc.is_closed:
            raise nats.errors.ConnectionClosedError
        size = len(payload)
        if not nc.is_connected and (nc._max_pending_size <= 0
                                    or size + nc._pending_data_size > nc._max_pending_size):
            raise nats.errors.OutboundBufferLimitError
        if size > nc._max_payload:
            raise nats.errors.MaxPayloadError
        head = _HEAD
        if msg_id is not None:
            head += f"Nats-Msg-Id: {msg_id.strip().translate(_VALUE_NEWLINES)}\r\n"
        if expected_last_subject_seq is not None:
            head += f"Nats-Expected-Last-Subject-Sequence: {int(expected_last_subject_seq)}\r\n"
        header = (head + self._stream_line).encode()
        self._n += 1
        reply = f"{self._prefix}{self._n}"
        hl = len(header)
        cmd = b"".join((f"HPUB {subject} {reply} {hl} {hl + size}\r\n".encode(), header, payload, _CRLF))
        loop = self._loop
        future = loop.create_future()
        deadline = loop.time() + self.timeout
        self._pending[reply.encode()] = (future, deadline)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        stats = nc.stats
        stats["out_msgs"] += 1
        stats["out_bytes"] += size
        nc._pending.append(cmd)   # nats-py's _send_command and publish's flush, inline
        nc._pending_data_size += len(cmd)
        try:
            if nc._max_pending_size > 0 and nc._pending_data_size > nc._max_pending_size:
                await nc._flush_pending(force_flush=True)
            if nc._flush_queue is not None and nc._flush_queue.empty():
                await nc._flush_pending()
        except BaseException:
            future.cancel()   # cancelled before its caller had it: never awaited (its entry goes at the deadline)
            raise
        return future

    async def result(self, future: asyncio.Future) -> tuple[str, int, bool]:
        """(stream, seq, duplicate) of a sent publish's ack; raises what js.publish raises for its answer.
        Cancelled, the publish is given up (its ack, if one comes, is dropped)."""
        try:
            data, headers = await future
        except asyncio.CancelledError:
            future.cancel()
            raise
        if headers:   # an ack carries none: a status (no responders), parsed as nats-py parses it
            parsed = await self.nc._process_headers(headers)
            if parsed and parsed.get(_STATUS) == _NO_RESPONDERS:
                raise nats.js.errors.NoStreamResponseError
        try:
            resp = _decode_json(data)
        except msgspec.DecodeError:   # not JSON: raise what json.loads raises for it
            resp = json.loads(data)
        if "error" in resp:
            raise nats.js.errors.APIError.from_error(resp["error"])
        try:
            return resp["stream"], resp["seq"], bool(resp.get("duplicate"))
        except KeyError:   # not an ack: raise what PubAck raises for it
            ack = PubAck.from_response(resp)
            return ack.stream, ack.seq, bool(ack.duplicate)

    def _on_reply(self, subject: bytes, data: bytes, headers: Optional[bytes]) -> None:
        entry = self._pending.pop(subject, None)
        if entry is not None and not entry[0].done():   # done: cancelled by its caller
            entry[0].set_result((data, headers))

    def _expire(self) -> None:
        """Fail every publish past its deadline; set the timer for the oldest one left."""
        self._timer = None
        pending, loop = self._pending, self._loop
        assert loop is not None
        now = loop.time()
        while pending:
            key, (future, deadline) = next(iter(pending.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            del pending[key]
            if not future.done():
                future.set_exception(nats.errors.TimeoutError())
