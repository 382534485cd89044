"""Our Client parses NATS header blocks exactly as nats-py's own parser does, only faster."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from nats.aio.client import Client as NatsClient

from eventlog.nats_client import Client, parse_header_lines

reference = NatsClient._parse_header_lines
piece = st.one_of(st.binary(max_size=12), st.sampled_from([b":", b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1f",
                                                           b"\r", b"\n", b"\xc3\xa9", b"\xff", b"Nats-Sequence"]))
lines = st.lists(st.lists(piece, max_size=6).map(b"".join), max_size=8)


@given(lines)
def test_any_header_block_parses_as_nats_py_parses_it(block):
    raw = b"\r\n".join(block) + b"\r\n\r\n"
    assert parse_header_lines(raw) == reference(raw)


def test_every_ascii_character_in_a_name_is_judged_as_nats_py_judges_it():
    for c in range(128):
        raw = b"Na" + bytes([c]) + b"me: value\r\n" + b"x" + bytes([c]) + b": y\r\n\r\n"
        assert parse_header_lines(raw) == reference(raw), c


def test_a_direct_get_header_block():
    raw = (b"Nats-Msg-Id: m-1\r\nNats-Stream: S\r\nNats-Subject: a.b.tick\r\nNats-Sequence: 12\r\n"
           b"Nats-Time-Stamp: 2026-12-01T12:00:00Z\r\n\r\n")
    assert parse_header_lines(raw) == reference(raw) == {
        "Nats-Msg-Id": "m-1", "Nats-Stream": "S", "Nats-Subject": "a.b.tick", "Nats-Sequence": "12",
        "Nats-Time-Stamp": "2026-12-01T12:00:00Z"}
    assert Client._parse_header_lines is parse_header_lines


def test_a_name_is_judged_once_and_the_memory_of_names_stays_bounded():
    """Header names repeat on every message (Nats-Stream, Nats-Subject, …): each name's verdict is
    remembered, for a bounded number of names; a block parses the same before and after that fills."""
    from eventlog import nats_client
    nats_client.NAMES.clear()
    raw = b"Nats-Stream: S\r\nBad Name: x\r\n\r\n"
    assert parse_header_lines(raw) == reference(raw) == {"Nats-Stream": "S"}
    assert nats_client.NAMES == {b"Nats-Stream": "Nats-Stream", b"Bad Name": None}
    for i in range(nats_client.MAX_NAMES + 10):
        parse_header_lines(b"X-%d: v\r\n\r\n" % i)
    assert len(nats_client.NAMES) <= nats_client.MAX_NAMES
    assert parse_header_lines(raw) == reference(raw)


def test_the_bulk_read_takes_a_direct_get_answers_place_as_the_header_dict_does():
    from eventlog.direct_read import _seq_subject, _status
    server = b"Nats-Stream: S\r\nNats-Subject: a.b.tick\r\nNats-Sequence: 12\r\nNats-Time-Stamp: 2026-12-01T12:00:00Z\r\n\r\n"
    for stored in (b"", b"Nats-Msg-Id: m-1\r\n", b"Nats-Sequence: 99\r\nNats-Subject: x.y\r\n"):  # the server's last
        block = b"NATS/1.0\r\n" + stored + server
        parsed = parse_header_lines(block[len(b"NATS/1.0\r\n"):])
        assert _seq_subject(block) == (int(parsed["Nats-Sequence"]), parsed["Nats-Subject"]) == (12, "a.b.tick")
        assert _status(block) == (None, 0)
    assert _status(b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 7\r\nNats-Last-Sequence: 3\r\n\r\n") == ("204", 7)
    assert _status(b"NATS/1.0 404 Message Not Found\r\n\r\n") == ("404", 0)
    assert _status(b"NATS/1.0 408\r\n\r\n") == ("408", 0)


async def test_a_raw_subscription_hands_over_data_and_header_block_and_ends_with_unsubscribe(nats_server):
    from eventlog import connect
    nc = await connect(nats_server.url, nats_server.auth(), name="raw-test")
    try:
        got, done = [], __import__("asyncio").Event()

        def handler(data, headers):
            got.append((data, headers))
            if len(got) == 2:
                done.set()

        sub = await nc.subscribe_raw("raw.test", handler)
        await nc.publish("raw.test", b"one")
        await nc.publish("raw.test", b"two", headers={"K": "v"})
        await done.wait()
        assert got[0] == (b"one", None)
        assert got[1][0] == b"two" and parse_header_lines(got[1][1][len(b"NATS/1.0\r\n"):]) == {"K": "v"}
        await sub.unsubscribe()
        assert sub._id not in nc._raw
    finally:
        await nc.close()


def test_a_consumed_messages_stream_sequence_is_nats_pys_metadata():
    import pytest
    from nats.aio.msg import Msg
    from nats.errors import NotJSMessageError

    from eventlog.jetstream import stream_seq
    replies = ["$JS.ACK.AOTX_JOURNAL.c0nsumer.1.4567.12.1733500000000000000.3",                     # v1
               "$JS.ACK.dom.acchash.AOTX_JOURNAL.c0nsumer.2.98765.13.1733500000000000000.0.rnd",      # v2
               "$JS.ACK._.acchash.S.c.1.7.8.1733500000000000000.0"]                                 # v2 less its token
    for reply in replies:
        msg = Msg(None, subject="j.a.tick", reply=reply, data=b"")
        assert stream_seq(reply) == msg.metadata.sequence.stream
    for bad in ["", "_INBOX.x.y", "$JS.ACK.S.c.1.2"]:
        with pytest.raises(NotJSMessageError):
            Msg.Metadata._from_reply(bad)
        with pytest.raises(NotJSMessageError):
            stream_seq(bad)
