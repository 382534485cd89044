"""The NATS protocol parser of our Client (eventlog.nats_client): a read's bytes framed in one pass.

nats-py's Parser (nats.protocol.parser) matches each control line against regular expressions, copies
each payload twice (a bytearray slice, then bytes), deletes it from its buffer and awaits
`Client._process_msg` for every message: ~28k instructions a message before anything reads it. This one
frames every complete MSG and HMSG of a read with `find` and `split` over the read's bytes and hands each
message on without awaiting where its subscription allows it:

* a raw handler's or a reply handler's subscription (`Client.subscribe_raw` / `subscribe_replies`): the
  handler is called as `Client._process_msg` calls it;
* a followed ordered consumer's subscription (`Client.deliver_stored`): the data message becomes a
  StoredMessage with nats-py's ordered-consumer bookkeeping done inline (the checks and updates of
  `Client._stored_msg`), queued with the rest of the read's in one go (eventlog.queue_runs), the counts
  that need not be per message (the flow-control count, the last reply, the stats) set once a read.

Everything else is nats-py's, unchanged: any other message — or a followed one that `_stored_msg` would
leave to nats-py (a status message, a consumer sequence out of order, a full queue, …) — is given to
`Client._process_msg` and awaited, after the messages queued so far; any operation other than MSG/HMSG
(PING, PONG, +OK, -ERR, INFO, an unknown one) is given, that line alone, to nats-py's parser; a MSG/HMSG
control line that is not the plain form below is given with everything after it to nats-py's parser,
which names the fault as always. A frame cut by the end of a read is kept and completed by the next one;
one larger than HANDOVER bytes is left, once its control line is read, to nats-py's state machine
(AWAITING_MSG_PAYLOAD), which gathers its payload without copying the bytes read so far again.

The plain form: `MSG <subject> <sid> [reply] <size>` and `HMSG <subject> <sid> [reply] <header size> <total
size>`, single spaces or any whitespace between, every number decimal digits, the header size at most the
total — what nats-py's expressions take (tests/eventlog/test_nats_parser.py: every frame, cut anywhere, gives
the same calls as nats-py's parser).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, ERR_RE, INFO_RE, OK_RE, PING_RE, PONG_RE
from nats.protocol.parser import Parser as _NatsParser

from .nats_headers import parse_header_lines
from .queue_runs import put_run, room
from .recorder import StoredMessage

HANDOVER = 1 << 16   # a frame cut by a read and larger than this: its payload gathered by nats-py's state machine
_CRLF = b"\r\n"
_HEADER_LINE = b"NATS/1.0\r\n"   # a header block without an inline status (a status has " 100 …" after NATS/1.0)
_HEADER_LINE_SIZE = len(_HEADER_LINE)
_JS_ACK = b"$JS.ACK."   # a v1 ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
_new = object.__new__
_OPERATIONS = (OK_RE, ERR_RE, PING_RE, PONG_RE, INFO_RE)   # (nats-py's order, after MSG and HMSG)
# a followed message's subject, decoded once per subject (the same few subjects carry every message; bounded)
SUBJECTS: Dict[bytes, str] = {}
MAX_SUBJECTS = 65536


class Parser(_NatsParser):
    """nats-py's Parser with the read's MSG/HMSG frames taken in one pass (see the module's note)."""

    async def parse(self, data: bytes = b"") -> None:
        if self.state != AWAITING_CONTROL_LINE:   # a large frame's payload being gathered: nats-py's way
            await _NatsParser.parse(self, data)
            return
        if self.buf:   # a frame cut by the last read: completed by this one
            data = bytes(self.buf) + data
            self.buf.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        await self._frames(data)

    async def _frames(self, data: bytes) -> None:
        nc = self.nc
        raws, replies, subs, stats = nc._raw, nc._replies, nc._subs, nc.stats
        size = len(data)
        pos = 0
        run = _Run()   # a followed subscription's StoredMessages not queued yet
        try:
            while pos < size:
                if data.startswith(b"HMSG ", pos):
                    first = pos + 5
                elif data.startswith(b"MSG ", pos):
                    first = pos + 4
                else:   # another operation (or the start of one cut by the read)
                    run.queue(nc)
                    op = _operation(data, pos)
                    if op is None:   # not one nats-py's parser takes line by line (or cut by the read)
                        if data.find(_CRLF, pos) < 0:
                            break
                        await _NatsParser.parse(self, data[pos:])   # nats-py judges the rest, as it would have
                        return
                    await _NatsParser.parse(self, data[pos:op])   # that operation alone
                    pos = op
                    continue
                end = data.find(_CRLF, first)
                if end < 0:
                    break   # (a control line cut by the read; nats-py waits for the rest of it too)
                frame = _plain(data[first:end], first - pos == 5)
                if frame is None:
                    run.queue(nc)
                    await _NatsParser.parse(self, data[pos:])   # nats-py names the fault
                    return
                subject, sid, reply, hlen, tlen = frame
                start = end + 2
                stop = start + tlen
                if stop + 2 > size:   # the frame is cut by the end of this read
                    if stop + 2 - pos > HANDOVER:   # its payload gathered by nats-py's state machine
                        self.msg_arg = {"subject": subject, "sid": sid, "reply": reply}
                        self.needed, self.header_needed = tlen, hlen
                        self.state = AWAITING_MSG_PAYLOAD
                        self.buf.extend(memoryview(data)[start:])
                        pos = size
                    break
                body = start + hlen
                handler = raws.get(sid)
                if handler is not None:   # (Client._process_msg's raw path)
                    stats["in_msgs"] += 1
                    stats["in_bytes"] += stop - body
                    handler(data[body:stop], data[start:body] if hlen else None)
                    pos = stop + 2
                    continue
                handler = replies.get(sid)
                if handler is not None:   # (Client._process_msg's reply path)
                    stats["in_msgs"] += 1
                    stats["in_bytes"] += stop - body
                    handler(subject, data[body:stop], data[start:body] if hlen else None)
                    pos = stop + 2
                    continue
                sub = subs.get(sid)
                mode = getattr(sub, "_aotx_stored", None)
                # a followed subscription's data message: Client._stored_msg's checks and updates
                if mode is not None and stop > body and reply and (not hlen or data.startswith(_HEADER_LINE, start, body)) \
                        and reply.count(b".") == 8:
                    head, sseq, dseq, _, _ = reply.rsplit(b".", 4)
                    jsi = sub._jsi
                    if head.startswith(_JS_ACK) and jsi is not None and jsi._ordered and sub._future is None \
                            and sub._max_msgs <= 0:
                        if sub is not run.sub:
                            run.queue(nc)
                            run.start(sub)
                        dseq = int(dseq)
                        tlen = stop - body
                        limit = sub._pending_bytes_limit
                        if dseq == jsi._dseq and len(run.messages) < run.room and \
                                not (limit > 0 and sub._pending_size + run.bytes + tlen >= limit):
                            jsi._dseq, jsi._sseq = dseq + 1, int(sseq)
                            name = SUBJECTS.get(subject)
                            if name is None:
                                if len(SUBJECTS) >= MAX_SUBJECTS:
                                    SUBJECTS.clear()
                                name = SUBJECTS[subject] = subject.decode()
                            msg = _new(StoredMessage)   # (a frozen dataclass: its fields set as its __init__ would)
                            msg.__dict__.update(seq=jsi._sseq, subject=name, data=data[body:stop], headers=(
                                parse_header_lines(data[start + _HEADER_LINE_SIZE:body])
                                if mode and hlen > _HEADER_LINE_SIZE else {}))
                            run.messages.append(msg)
                            run.bytes += tlen
                            run.reply = reply
                            pos = stop + 2
                            continue
                # any other message: nats-py's path (through Client._process_msg), after what is queued so far
                run.queue(nc)
                await nc._process_msg(sid, subject, reply, data[body:stop], data[start:body] if hlen else None)
                pos = stop + 2
        finally:
            run.queue(nc)
        if pos < size:   # a cut frame (or control line): kept for the next read
            self.buf.extend(memoryview(data)[pos:])


def _operation(data: bytes, pos: int) -> Optional[int]:
    """Where the operation at `pos` ends, where it is one that nats-py's parser matches without a payload (+OK,
    -ERR, PING, PONG, INFO: the same expressions, so the same bytes, blank lines a PING's expression takes
    included); None for anything else (a MSG/HMSG line that is not the plain form, an unknown operation, or one
    cut by the read)."""
    if data.startswith(b"MSG", pos) or data.startswith(b"HMSG", pos):
        return None
    rest = memoryview(data)[pos:]
    for expression in _OPERATIONS:
        m = expression.match(rest)
        if m is not None:
            return pos + m.end()
    return None


def _plain(line: bytes, headers: bool) -> Optional[Tuple[bytes, int, bytes, int, int]]:
    """(subject, sid, reply, header size, total size) of a control line's arguments in the plain form, else None
    (a carriage return inside, or any whitespace after the last number: nats-py's expressions judge those)."""
    if b"\r" in line or not line[-1:].isdigit():
        return None
    args = line.split()
    n = len(args)
    if headers:   # HMSG subject sid [reply] hsize size
        if n == 5:
            subject, sid, reply, hsize, tsize = args
        elif n == 4:
            subject, sid, hsize, tsize = args
            reply = b""
        else:
            return None
        if not (sid.isdigit() and hsize.isdigit() and tsize.isdigit()):
            return None
        hlen, tlen = int(hsize), int(tsize)
        if hlen > tlen:
            return None
        return subject, int(sid), reply, hlen, tlen
    if n == 4:    # MSG subject sid [reply] size
        subject, sid, reply, tsize = args
    elif n == 3:
        subject, sid, tsize = args
        reply = b""
    else:
        return None
    if not (sid.isdigit() and tsize.isdigit()):
        return None
    return subject, int(sid), reply, 0, int(tsize)


class _Run:
    """StoredMessages of one followed subscription framed from a read and not queued yet."""

    __slots__ = ("sub", "messages", "bytes", "reply", "room")

    def __init__(self) -> None:
        self.sub: Any = None
        self.messages: list = []
        self.bytes = 0
        self.reply = b""
        self.room = 0

    def start(self, sub: Any) -> None:
        self.sub, self.room = sub, room(sub._pending_queue)

    def queue(self, nc: Any) -> None:
        """Queue the run (its per-message bookkeeping is done) and do what nats-py does per message that only
        the run's end needs; the run is then empty and belongs to no subscription."""
        sub, messages = self.sub, self.messages
        self.sub = None
        if not messages:
            return
        n, size = len(messages), self.bytes
        self.messages, self.bytes = [], 0
        stats = nc.stats
        stats["in_msgs"] += n
        stats["in_bytes"] += size
        sub._received += n
        sub._pending_size += size
        jsi = sub._jsi
        jsi._active = True
        put_run(sub._pending_queue, messages)
        jsi._fciseq += n   # (jsi.track_sequences: the flow-control count and the last reply)
        jsi._cmeta = self.reply.decode()
