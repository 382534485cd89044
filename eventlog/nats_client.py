"""Our nats-py Client: the same client, with a faster protocol parser and header-block parser.

`_ps`: our parser (eventlog.nats_parser), which frames a whole read's MSG/HMSG frames in one pass and hands
the messages below to their subscriptions without nats-py's message path; anything else goes nats-py's way.
`_parse_header_lines`: eventlog.nats_headers' parser of a header block (nats-py's own runs a generator
over every character of every name: half the CPU of reading a direct get's answer), the same dict for
every input (tests/eventlog/test_nats_client.py).

`subscribe_raw(subject, handler)`: a subscription whose messages skip nats-py's message path (the
header dict, a `Msg`, the subscription's queue and task): the parser's `handler(data, headers)`
call, with the raw header block (bytes, or None), synchronously, in order. What a bulk read does
per message (eventlog.direct_read) and nothing more; `handler` must not raise.

`subscribe_replies(subject, handler)`: the same with the message's subject (bytes) as well,
`handler(subject, data, headers)`: one wildcard inbox whose replies are told apart by their subject
(eventlog.publish: JetStream acks).

`deliver_stored(sub, headers)`: the data messages of a JetStream ordered push consumer's subscription
(the follower's) are queued as `StoredMessage`s straight from the parser: nats-py's ordered-consumer
bookkeeping for a data message (its consumer and stream sequences, the flow-control count and last reply,
the pending bytes) done inline, without the header dict (unless asked for), the `Msg`, its status check
and the reply's token list twice (`_stored_msg` for one message; eventlog.nats_parser for a read's run of
them). Anything else — a status message (idle heartbeat, flow control), an empty or reply-less message, a
reply that is not a v1 `$JS.ACK` subject, a consumer sequence out of order (nats-py makes the consumer
again), a full queue or byte limit (nats-py's slow-consumer error) — takes nats-py's own path, unchanged.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from nats.aio.client import Client as _NatsClient
from nats.aio.subscription import Subscription

from .nats_headers import MAX_NAMES, NAMES, parse_header_lines
from .nats_parser import Parser
from .recorder import NO_HEADERS, StoredMessage

__all__ = ["Client", "MAX_NAMES", "NAMES", "parse_header_lines"]
_HEADER_LINE = b"NATS/1.0\r\n"   # a header block without an inline status (a status has " 100 …" after NATS/1.0)
_ACK_V1_TOKENS = 9   # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>


class Client(_NatsClient):
    """nats-py's Client with our protocol parser and `parse_header_lines` for its header blocks."""

    _parse_header_lines = staticmethod(parse_header_lines)

    def __init__(self) -> None:
        super().__init__()
        self._ps = Parser(self)
        self._raw: Dict[int, RawHandler] = {}   # subscription id -> its raw handler
        self._replies: Dict[int, ReplyHandler] = {}   # subscription id -> its reply handler (with the subject)

    async def subscribe_raw(self, subject: str, handler: "RawHandler") -> Subscription:
        """A subscription whose every message is `handler(data, headers)` (see the module's note);
        its `unsubscribe()` ends it as any other's."""
        sub = await self.subscribe(subject, cb=_unused)
        self._raw[sub._id] = handler
        return sub

    async def subscribe_replies(self, subject: str, handler: "ReplyHandler") -> Subscription:
        """A subscription whose every message is `handler(subject, data, headers)` (see the module's note)."""
        sub = await self.subscribe(subject, cb=_unused)
        self._replies[sub._id] = handler
        return sub

    @staticmethod
    def deliver_stored(sub: Subscription, headers: bool = True) -> None:
        """Queue the data messages of `sub` (the nats-py Subscription under a JetStream ordered push
        consumer; it keeps its identity when nats-py makes the consumer again) as StoredMessages (see the
        module's note); `headers`: parse each message's headers (else an empty dict)."""
        sub._aotx_stored = bool(headers)   # (read by _process_msg)

    def _stored_msg(self, sub: Subscription, subject: bytes, reply: bytes, data: bytes,
                    headers: Optional[bytes], with_headers: bool) -> bool:
        """nats-py's `_process_msg` for a data message of an ordered consumer, queuing a StoredMessage;
        False (nothing changed) where nats-py's own path must take the message."""
        jsi = sub._jsi
        if not data or not reply or jsi is None or not jsi._ordered or sub._future is not None \
                or sub._max_msgs > 0 or (headers is not None and not headers.startswith(_HEADER_LINE)):
            return False
        tokens = reply.split(b".")
        if len(tokens) != _ACK_V1_TOKENS or tokens[0] != b"$JS" or tokens[1] != b"ACK":
            return False
        dseq = int(tokens[6])
        size = len(data)
        queue = sub._pending_queue
        if dseq != jsi._dseq or queue.full() or \
                (sub._pending_bytes_limit > 0 and sub._pending_size + size >= sub._pending_bytes_limit):
            return False   # (nats-py: a reset of the ordered consumer, or its slow-consumer error)
        sseq = int(tokens[5])
        stats = self.stats
        stats["in_msgs"] += 1
        stats["in_bytes"] += size
        sub._received += 1
        jsi._active = True
        jsi._dseq, jsi._sseq = dseq + 1, sseq
        sub._pending_size += size
        queue.put_nowait(StoredMessage(sseq, subject.decode(), data, parse_header_lines(headers[len(_HEADER_LINE):])
                                       if with_headers and headers is not None and len(headers) > len(_HEADER_LINE)
                                       else NO_HEADERS))
        jsi._fciseq += 1   # (jsi.track_sequences: the flow-control count and the last reply)
        jsi._cmeta = reply.decode()
        return True

    def _remove_sub(self, sid: int, max_msgs: int = 0) -> None:
        self._raw.pop(sid, None)
        self._replies.pop(sid, None)
        super()._remove_sub(sid, max_msgs)

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
        handler = self._raw.get(sid)
        if handler is None:
            replies = self._replies.get(sid)
            if replies is None:
                sub = self._subs.get(sid)
                stored = getattr(sub, "_aotx_stored", None)
                if stored is not None and self._stored_msg(sub, subject, reply, data, headers, stored):
                    return None
                return await super()._process_msg(sid, subject, reply, data, headers)
            stats = self.stats
            stats["in_msgs"] += 1
            stats["in_bytes"] += len(data)
            replies(subject, data, headers)
            return None
        stats = self.stats
        stats["in_msgs"] += 1
        stats["in_bytes"] += len(data)
        handler(data, headers)

    @property
    def cluster_size(self) -> int:
        """How many servers the cluster this client reached has, as the server's INFO announces them
        (`connect_urls`, itself included); 1 when the server is not part of a cluster."""
        info = self._server_info
        if not info.get("cluster"):
            return 1
        return max(1, len(set(info.get("connect_urls") or ())))


RawHandler = Callable[[bytes, Optional[bytes]], None]
ReplyHandler = Callable[[bytes, bytes, Optional[bytes]], None]


async def _unused(msg) -> None:   # a raw subscription's messages never reach its callback
    return None
