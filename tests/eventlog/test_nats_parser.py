"""Our protocol parser (eventlog.nats_parser) hands on the same messages and operations as nats-py's, in the
same order, whatever the bytes and wherever the reads cut them: the frames it takes in one pass (a raw or
reply handler called at once, any other message given to `_process_msg`), the other operations and any line
that is not the plain MSG/HMSG form given to nats-py's own parser (the same fault where there is one). The
followed subscriptions' path is held equal to nats-py's by tests/eventlog/test_subscription_queue.py on a
real server."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.errors import ProtocolError
from nats.protocol.parser import Parser as NatsParser

from eventlog.nats_parser import HANDOVER, Parser

RAW_SID, REPLY_SID = 7, 8


class Peer:
    """What a parser calls on its client, recorded: raw and reply handlers on sids 7 and 8 (called directly
    by our parser; through `_process_msg` as our Client dispatches them, for nats-py's)."""

    def __init__(self) -> None:
        self.calls: list = []
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self._raw = {RAW_SID: lambda data, headers: self.calls.append(("raw", data, headers))}
        self._replies = {REPLY_SID: lambda subject, data, headers: self.calls.append(("reply", subject, data, headers))}
        self._subs: dict = {}

    async def _process_msg(self, sid, subject, reply, data, headers) -> None:
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        if sid in self._raw:
            self._raw[sid](data, headers)
        elif sid in self._replies:
            self._replies[sid](subject, data, headers)
        else:
            self.calls.append(("msg", sid, subject, reply, data, headers))

    async def _process_ping(self) -> None:
        self.calls.append(("ping",))

    async def _process_pong(self) -> None:
        self.calls.append(("pong",))

    async def _process_info(self, info) -> None:
        self.calls.append(("info", info))

    async def _process_err(self, err) -> None:
        self.calls.append(("err", err))


def _drive(coro) -> None:
    """Run a coroutine that never suspends (every peer call here returns at once) without an event loop."""
    try:
        coro.send(None)
    except StopIteration:
        return
    raise AssertionError("the parser suspended")


def _run(parser_type, stream: bytes, cuts: list[int]):
    peer = Peer()
    parser = parser_type(peer)
    fault = None

    async def feed() -> None:
        last = 0
        for cut in sorted(set(c for c in cuts if 0 < c < len(stream))) + [len(stream)]:
            await parser.parse(stream[last:cut])
            last = cut

    try:
        _drive(feed())
    except ProtocolError as exc:
        fault = type(exc)
    return peer.calls, peer.stats, fault, bytes(parser.buf), parser.state


def _msg(subject: bytes, sid: int, reply: bytes, headers: bytes, payload: bytes, sep: bytes = b" ") -> bytes:
    args = [subject, b"%d" % sid] + ([reply] if reply else [])
    if headers:
        line = b"HMSG" + sep + sep.join(args + [b"%d" % len(headers), b"%d" % (len(headers) + len(payload))])
    else:
        line = b"MSG" + sep + sep.join(args + [b"%d" % len(payload)])
    return line + b"\r\n" + headers + payload + b"\r\n"


payloads = st.one_of(st.binary(max_size=40), st.sampled_from([b"", b"\r\nMSG a 1 3\r\nxyz\r\n", b"PING\r\n"]),
                     st.integers(0, 3).map(lambda k: b"z" * (HANDOVER + 100 * k)))
headers = st.sampled_from([b"", b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nNats-Msg-Id: m-1\r\n\r\n",
                           b"NATS/1.0 100 Idle Heartbeat\r\n\r\n"])
frames = st.one_of(
    st.builds(_msg, st.sampled_from([b"a.b.tick", b"_INBOX.x", b"s"]), st.sampled_from([1, 2, RAW_SID, REPLY_SID]),
              st.sampled_from([b"", b"$JS.ACK.S.C.1.5.5.1700000000.0", b"r"]), headers, payloads,
              st.sampled_from([b" ", b" ", b"\t", b"  "])),
    st.sampled_from([b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b"-ERR 'Stale Connection'\r\n", b'INFO {"a": 1}\r\n']),
)
bad = st.sampled_from([b"MSG a 1 2 3 4\r\nxx\r\n", b"MSG a b 2\r\nxx\r\n", b"HMSG a 1 9 2\r\nxx\r\n",
                       b"MSG a 1 -2\r\nxx\r\n", b"WHAT\r\n", b"HMSG a 1 x 2\r\nxx\r\n", b"MSG a 1 2 \r\nxx\r\n",
                       b"MSG a 1 r\r2\r\nxx\r\n", b"MSG a 1\r 2\r\nxx\r\n", b"PING\r\n\r\n", b"PINGX\r\n", b"\r\n"])


@settings(deadline=None)
@given(st.lists(frames, min_size=1, max_size=12), st.lists(st.integers(0, 1 << 20), max_size=8))
def test_any_frames_cut_anywhere_are_handed_on_as_nats_py_hands_them(ops, cuts):
    stream = b"".join(ops)
    ours, theirs = _run(Parser, stream, cuts), _run(NatsParser, stream, cuts)
    assert ours[:3] == theirs[:3]
    assert ours[2] is None and len(ours[0]) == len(ops) - sum(op.startswith(b"+OK") for op in ops)   # (all of them)


@settings(deadline=None)
@given(st.lists(frames, max_size=4), bad, st.lists(frames, max_size=3), st.lists(st.integers(0, 400), max_size=5))
def test_a_line_that_is_not_the_plain_form_is_nats_py_s_to_judge(before, fault, after, cuts):
    stream = b"".join(before) + fault + b"".join(after)
    ours, theirs = _run(Parser, stream, cuts), _run(NatsParser, stream, cuts)
    assert ours[:3] == theirs[:3]


def test_a_cut_frame_waits_for_the_next_read_and_a_large_one_goes_to_nats_py_s_state_machine():
    small = _msg(b"a.b", 1, b"r", b"NATS/1.0\r\n\r\n", b"p" * 100)
    big = _msg(b"a.b", 1, b"", b"", b"q" * (HANDOVER + 10))
    for stream in (small + big + small, big + small + big):
        for cut in range(0, len(stream), 997):
            assert _run(Parser, stream, [cut, cut + 50, cut + 40_000])[:3] == \
                _run(NatsParser, stream, [cut, cut + 50, cut + 40_000])[:3]
    calls, _, _, buf, state = _run(Parser, small + small[:-1], [])
    assert len(calls) == 1 and buf == small[:-1] and state == 1   # (a small frame cut: kept whole for the next read)
    calls, _, _, buf, state = _run(Parser, small + big[:10], [])
    assert len(calls) == 1 and buf == big[:10] and state == 1   # (a control line cut: kept)
    calls, _, _, buf, state = _run(Parser, small + big[:200], [])
    assert len(calls) == 1 and state == 2 and len(buf) < 200   # (a large frame: its payload gathered by nats-py)


# ---- a followed ordered consumer's subscription (Client.deliver_stored): our runs against Client._stored_msg ----

FOLLOWED_SID = 3


class _JSI:
    _ordered = True

    def __init__(self) -> None:
        self._dseq, self._sseq, self._active, self._fciseq, self._cmeta = 1, 0, False, 0, None


class _Followed:
    """The parts of a nats-py Subscription under an ordered push consumer that the stored path reads and keeps."""

    def __init__(self, headers: bool, maxsize: int) -> None:
        self._aotx_stored, self._jsi, self._future, self._max_msgs = headers, _JSI(), None, 0
        self._pending_bytes_limit, self._pending_size, self._received = 0, 0, 0
        self._pending_queue: asyncio.Queue = asyncio.Queue(maxsize=maxsize)


class FollowingPeer(Peer):
    """A client with one followed subscription (sid 3). For nats-py's parser its `_process_msg` is our Client's:
    `Client._stored_msg` first, else the message is recorded as left to nats-py."""

    def __init__(self, headers: bool = False, maxsize: int = 0) -> None:
        super().__init__()
        self.sub = _Followed(headers, maxsize)
        self._subs = {FOLLOWED_SID: self.sub}

    async def _process_msg(self, sid, subject, reply, data, headers) -> None:
        from eventlog.nats_client import Client
        sub = self._subs.get(sid)
        if sub is not None and Client._stored_msg(self, sub, subject, reply, data, headers, sub._aotx_stored):
            return
        await super()._process_msg(sid, subject, reply, data, headers)

    def state(self) -> tuple:
        sub, jsi = self.sub, self.sub._jsi
        return (self.calls, self.stats, list(sub._pending_queue._queue), sub._pending_queue._unfinished_tasks,
                sub._received, sub._pending_size, jsi._dseq, jsi._sseq, jsi._fciseq, jsi._cmeta, jsi._active)


def _followed(peer_args: dict, parser_type, stream: bytes, cuts: list[int]) -> tuple:
    peer = FollowingPeer(**peer_args)
    parser = parser_type(peer)

    async def feed() -> None:
        last = 0
        for cut in sorted(set(c for c in cuts if 0 < c < len(stream))) + [len(stream)]:
            await parser.parse(stream[last:cut])
            last = cut

    fault = None
    try:
        _drive(feed())
    except ProtocolError as exc:   # (an odd control line nats-py's expressions refuse)
        fault = type(exc)
    return peer.state() + (fault,)


def _data(subject: bytes, sseq: int, dseq: int, payload: bytes, headers: bytes, sep: bytes, sid: int = FOLLOWED_SID,
          reply: bytes | None = None) -> bytes:
    ack = b"$JS.ACK.STREAM.cons.1.%d.%d.1733587200000000000.%d" % (sseq, dseq, 9) if reply is None else reply
    return _msg(subject, sid, ack, headers, payload, sep)


@st.composite
def followed_streams(draw):
    """Data messages of the followed consumer in order (now and then one out of order or skipped), among
    heartbeats, flow-control requests, other subscriptions' messages and odd control lines."""
    out, dseq, sseq = [], 1, 10
    for _ in range(draw(st.integers(1, 24))):
        kind = draw(st.sampled_from(["data"] * 16 + ["skip", "status", "fc", "other", "odd", "empty", "v2"]))
        subject = draw(st.sampled_from([b"j.a.tick", b"j.b.tick", b"j.c.tick"]))
        sep = draw(st.sampled_from([b" "] * 30 + [b"\t", b"  "]))
        payload = draw(st.one_of(st.binary(min_size=1, max_size=30), st.sampled_from([b"\r\nHMSG x 3 y 1 2\r\n"])))
        hdrs = draw(st.sampled_from([b"NATS/1.0\r\nNats-Msg-Id: m\r\n\r\n", b"NATS/1.0\r\n\r\n", b""]))
        if kind in ("data", "skip", "empty"):
            dseq += kind == "skip"
            sseq += draw(st.integers(1, 3))
            out.append(_data(subject, sseq, dseq, b"" if kind == "empty" else payload, hdrs, sep))
            dseq += 1
        elif kind == "status":
            out.append(_msg(b"_INBOX.x", FOLLOWED_SID, b"", b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", b"", sep))
        elif kind == "fc":
            out.append(_msg(b"_INBOX.x", FOLLOWED_SID, b"$JS.FC.S.c.1", b"NATS/1.0 100 FlowControl Request\r\n\r\n",
                            b"", sep))
        elif kind == "other":
            out.append(_data(subject, sseq, dseq, payload, hdrs, sep, sid=1))
        elif kind == "v2":
            out.append(_data(subject, sseq, dseq, payload, hdrs, sep, reply=b"$JS.ACK.d.acc.S.c.1.%d.%d.1.0.x" % (sseq, dseq)))
        else:
            out.append(_data(subject, sseq, dseq, payload, hdrs, sep, reply=b"$JS.ACK.S.c.1.%d.\x0b%d.1.0" % (sseq, dseq)))
    return b"".join(out)


@settings(deadline=None)
@given(followed_streams(), st.lists(st.integers(0, 3000), max_size=6), st.booleans(), st.sampled_from([0, 3, 1000]))
def test_a_followed_consumers_messages_are_queued_and_counted_as_our_clients_stored_path_does(stream, cuts, headers,
                                                                                          maxsize):
    """The same StoredMessages queued (headers parsed or left empty), the same messages left to nats-py's path
    (status messages, a consumer sequence out of order, a full queue, a reply that is not a v1 ack subject), and
    the same ordered-consumer state and counts after, as `Client._stored_msg` under nats-py's parser gives."""
    args = {"headers": headers, "maxsize": maxsize}
    assert _followed(args, Parser, stream, cuts) == _followed(args, NatsParser, stream, cuts)
