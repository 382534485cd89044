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
        asyncio.run(feed())
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


@settings(max_examples=300, deadline=None)
@given(st.lists(frames, min_size=1, max_size=12), st.lists(st.integers(0, 1 << 20), max_size=8))
def test_any_frames_cut_anywhere_are_handed_on_as_nats_py_hands_them(ops, cuts):
    stream = b"".join(ops)
    ours, theirs = _run(Parser, stream, cuts), _run(NatsParser, stream, cuts)
    assert ours[:3] == theirs[:3]
    assert ours[2] is None and len(ours[0]) == len(ops) - sum(op.startswith(b"+OK") for op in ops)   # (all of them)


@settings(max_examples=200, deadline=None)
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
