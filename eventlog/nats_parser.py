"""The NATS protocol parser of our Client (eventlog.nats_client): a read's bytes framed in one pass.

nats-py's Parser (nats.protocol.parser) matches each control line against regular expressions, copies
each payload twice (a bytearray slice, then bytes), deletes it from its buffer and awaits
`Client._process_msg` for every message: ~28k instructions a message before anything reads it. This one
frames every complete MSG and HMSG of a read with `find` and `split` over the read's bytes and hands each
message on without awaiting where its subscription allows it:

* a raw handler's or a reply handler's subscription (`Client.subscribe_raw` / `subscribe_replies`): the
  handler is called as `Client._process_msg` calls it;
* a followed ordered consumer's subscription (`Client.deliver_stored`): the data message becomes a
  StoredMessage with nats-py's ordered-consumer bookkeeping done inline, queued with the rest of the read's
  in one go (eventlog.followed_runs: `Client._stored_msg`'s checks and updates, a run at a time).

Everything else is nats-py's, unchanged: any other message — or a followed one that `_stored_msg` would
leave to nats-py (a status message, a consumer sequence out of order, a full queue, …) — is given to
`Client._process_msg` and awaited, after the messages queued so far; an operation other than MSG/HMSG that
nats-py's expressions match (+OK, -ERR, PING, PONG, INFO) is given, those bytes alone, to nats-py's parser;
anything else (an unknown operation, a MSG/HMSG control line that is not the plain form below) is given with
everything after it to nats-py's parser, which judges it as always. A frame cut by the end of a read is kept
and completed by the next one; one larger than HANDOVER bytes is left, once its control line is read, to
nats-py's state machine (AWAITING_MSG_PAYLOAD), which gathers its payload without copying the bytes read so
far again.

The plain form: `MSG <subject> <sid> [reply] <size>` and `HMSG <subject> <sid> [reply] <header size> <total
size>`, any whitespace but a carriage return between, every number decimal digits, the last right before the
line's end, the header size at most the total — what nats-py's expressions take (tests/eventlog/
test_nats_parser.py: any frames, cut anywhere, give the same calls as nats-py's parser).
"""

from __future__ import annotations

from typing import Optional, Tuple

from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, ERR_RE, INFO_RE, OK_RE, PING_RE, PONG_RE
from nats.protocol.parser import Parser as _NatsParser

from .followed_runs import INTS, MAX_INTS, Run, follows, more

HANDOVER = 1 << 16   # a frame cut by a read and larger than this: its payload gathered by nats-py's state machine
_CRLF = b"\r\n"
_OPERATIONS = (OK_RE, ERR_RE, PING_RE, PONG_RE, INFO_RE)   # (nats-py's order, after MSG and HMSG)


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
        run = Run()   # a followed subscription's StoredMessages not queued yet
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
                    await _NatsParser.parse(self, data[pos:])   # nats-py judges it
                    return
                subject, token, reply, hlen, tlen = frame
                sid = int(token)
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
                mode = None if sub is None else sub.__dict__.get("_aotx_stored")   # (no AttributeError made a message)
                if mode is not None and follows(sub, data, start, body, stop, reply, run, nc):
                    # a followed subscription's data message: queued in the run, and the ones right after it too
                    # where they are as plain (followed_runs.more)
                    run.take(data, subject, token, start, body, stop, reply, mode)
                    pos = more(data, stop + 2, size, run) if run.fast else stop + 2
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


def _plain(line: bytes, headers: bool) -> Optional[Tuple[bytes, bytes, bytes, int, int]]:
    """(subject, sid token, reply, header size, total size) of a control line's arguments (after MSG/HMSG) in the
    plain form, else None (a carriage return inside, whitespace after the last number: nats-py's judges those).
    Each size token is remembered with its value (followed_runs.INTS) for the fast loop."""
    if line.find(b"\r") >= 0 or not line[-1:].isdigit():
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
    else:         # MSG subject sid [reply] size
        if n == 4:
            subject, sid, reply, tsize = args
        elif n == 3:
            subject, sid, tsize = args
            reply = b""
        else:
            return None
        hsize = b"0"
    if not (sid.isdigit() and hsize.isdigit() and tsize.isdigit()):
        return None
    hlen, tlen = int(hsize), int(tsize)
    if hlen > tlen:
        return None
    if len(INTS) >= MAX_INTS:
        INTS.clear()
    INTS[hsize], INTS[tsize] = hlen, tlen
    return subject, sid, reply, hlen, tlen
