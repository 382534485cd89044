"""A followed ordered consumer's data messages taken from a read as StoredMessages, a run at a time
(eventlog.nats_parser; the subscriptions `Client.deliver_stored` marks: the follower's).

For such a message nats-py's `Client._process_msg` parses its header block into a dict, builds a `Msg`,
checks it for a status, splits its reply subject into tokens (twice, with ours), checks the consumer
sequence, queues it and counts it (`Client._stored_msg` does the same checks and updates for one message).
Here `follows` makes those checks for the first message of a run, `Run.take` queues it in the run, and `more`
takes the messages right after it in one loop while each is as plain as the one before (the same sid token
and ack subject head, the next consumer sequence, a header block without a status, room in the queue): per
message a split of its control line, two of its reply's numbers, a slice of its data and a StoredMessage.
`Run.queue` then puts the run in the subscription's queue in one go (eventlog.queue_runs) and does once what
nats-py does per message where only the run's end matters (the flow-control count, the last reply, the
received and pending counts, the stats). Whatever any check declines is the caller's (nats-py's path).
"""

from __future__ import annotations

from typing import Any, Dict

from .nats_headers import parse_header_lines
from .queue_runs import put_run, room
from .recorder import NO_HEADERS, StoredMessage

_CRLF = b"\r\n"
_HEADER_LINE = b"NATS/1.0\r\n"   # a header block without an inline status (a status has " 100 …" after NATS/1.0)
_HEADER_LINE_SIZE = len(_HEADER_LINE)
_JS_ACK = b"$JS.ACK."   # a v1 ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
_tuple_new = tuple.__new__
# a followed message's subject, decoded once per subject (the same few subjects carry every message); the value of
# each size token seen in a plain control line (eventlog.nats_parser._plain): both bounded
SUBJECTS: Dict[bytes, str] = {}
MAX_SUBJECTS = 65536
INTS: Dict[bytes, int] = {}
MAX_INTS = 4096


def follows(sub: Any, data: bytes, start: int, body: int, stop: int, reply: bytes, run: "Run", nc: Any) -> bool:
    """Does this message of a followed subscription take our path (`Client._stored_msg`'s checks: a data message
    with a v1 ack reply, its consumer sequence the next, room in the queue)? Starts the run of `sub` where it
    was another subscription's."""
    if stop == body or not reply or (body > start and not data.startswith(_HEADER_LINE, start, body)):
        return False   # (an empty message, no reply, a status message: nats-py's)
    jsi = sub._jsi
    if jsi is None or not jsi._ordered or sub._future is not None or sub._max_msgs > 0 or reply.count(b".") != 8:
        return False
    head, _, dseq, _, _ = reply.rsplit(b".", 4)
    if not head.startswith(_JS_ACK) or int(dseq) != jsi._dseq:
        return False   # (not a v1 ack subject; a consumer sequence out of order: nats-py makes the consumer again)
    if sub is not run.sub:
        run.queue(nc)
        run.start(sub)
    limit = run.limit
    if len(run.messages) >= run.room or (limit > 0 and sub._pending_size + run.bytes + stop - body >= limit):
        return False   # (a full queue or byte limit: nats-py's slow-consumer error)
    run.head = head
    return True


def more(data: bytes, pos: int, size: int, run: "Run") -> int:
    """Take the data messages of the run's subscription from `pos` on, each as `follows` and `Run.take` would
    take it where it is as plain as the one before (the same sid token and ack subject head, the next consumer
    sequence, a header block without a status, a subject seen before, room left), in one loop; stop at the
    first that is not (the caller takes it) and answer where."""
    sub = run.sub
    jsi = sub._jsi
    sid, head, messages, free, limit = run.sid, run.head, run.messages, run.room, run.limit
    pending, taken, dnext, sseq, last = sub._pending_size + run.bytes, 0, jsi._dseq, jsi._sseq, run.reply
    ints, subjects, new, empty, find, space = INTS, SUBJECTS, _tuple_new, NO_HEADERS, data.find, b" "
    while pos < size:
        end = find(b"\n", pos) - 1   # (where the control line's \r\n starts)
        if end < pos or data[end] != 13:
            break
        # `HMSG <subject> <sid> <reply> <hsize> <size>` with single spaces, every token as in the message before
        # (a subject and size tokens `_plain` took, the same sid and ack head) or all digits: what nats-py's
        # expression takes the same way; anything else is the caller's
        args = data[pos:end].split(space)
        if len(args) != 6:
            break
        op, subject, token, reply, hsize, tsize = args
        hlen, tlen = ints.get(hsize), ints.get(tsize)
        if op != b"HMSG" or token != sid or hlen is None or tlen is None or hlen > tlen:
            break
        start = end + 2
        body, stop = start + hlen, start + tlen
        if stop + 2 > size or stop == body or (hlen and (hlen < _HEADER_LINE_SIZE or
                                                         data[start:start + _HEADER_LINE_SIZE] != _HEADER_LINE)):
            break
        parts = reply.rsplit(b".", 4)
        if len(parts) != 5 or parts[0] != head or not (parts[1].isdigit() and parts[2].isdigit() and
                                                       parts[3].isdigit() and parts[4].isdigit()) \
                or int(parts[2]) != dnext:
            break
        n = stop - body
        name = subjects.get(subject)
        if name is None or len(messages) >= free or (limit > 0 and pending + n >= limit):
            break
        sseq = int(parts[1])
        messages.append(new(StoredMessage, (sseq, name, data[body:stop], empty)))
        dnext += 1
        pending += n
        taken += n
        last = reply
        pos = stop + 2
    jsi._dseq, jsi._sseq = dnext, sseq
    run.bytes += taken
    run.reply = last
    return pos


class Run:
    """StoredMessages of one followed subscription framed from a read and not queued yet."""

    __slots__ = ("sub", "messages", "bytes", "reply", "room", "limit", "sid", "head", "fast")

    def __init__(self) -> None:
        self.sub: Any = None
        self.messages: list = []
        self.bytes = 0
        self.reply = b""
        self.room = self.limit = 0
        self.sid = self.head = b""
        self.fast = False

    def start(self, sub: Any) -> None:
        self.sub, self.room, self.limit = sub, room(sub._pending_queue), sub._pending_bytes_limit

    def take(self, data: bytes, subject: bytes, sid: bytes, start: int, body: int, stop: int, reply: bytes,
             headers: bool) -> None:
        """Queue in the run the message `follows` accepted (with its headers parsed where `headers`); `more` may
        take the next ones where the reader asked for none (the follower)."""
        jsi = self.sub._jsi
        parts = reply.rsplit(b".", 4)
        jsi._dseq, jsi._sseq = int(parts[2]) + 1, int(parts[1])
        name = SUBJECTS.get(subject)
        if name is None:
            if len(SUBJECTS) >= MAX_SUBJECTS:
                SUBJECTS.clear()
            name = SUBJECTS[subject] = subject.decode()
        fields = parse_header_lines(data[start + _HEADER_LINE_SIZE:body]) \
            if headers and body - start > _HEADER_LINE_SIZE else NO_HEADERS
        self.messages.append(_tuple_new(StoredMessage, (jsi._sseq, name, data[body:stop], fields)))
        self.bytes += stop - body
        self.reply = reply
        self.sid = sid
        self.fast = not headers

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
