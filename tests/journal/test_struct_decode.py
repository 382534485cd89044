"""aotx.journal.struct_decode: the feed's msgspec decode of a payload straight into its event.

It must build exactly what the dict path (REGISTRY.decode) builds, and decline (None, so the dict
path decides and names the fault) everything else — never accept what the dict path refuses."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from aotx.journal import TransferKind
from aotx.journal.registry import REGISTRY
from aotx.journal.transfer import Transfer, encode_transfer, unpack_body
from aotx.journal.whole import PAYLOAD_DECODERS, whole_transfers
from aotx.stored.errors import StoredCodecError

from .test_event_registry import SETTINGS, _shape, damaged, events

JOURNALLED = sorted((k for k in REGISTRY.kinds() if k.transfer is not None), key=lambda k: k.tag)


@pytest.mark.parametrize("kind", JOURNALLED, ids=lambda k: k.tag)
@settings(SETTINGS, max_examples=10)
@given(data=st.data())
def test_the_payload_decoder_builds_what_the_dict_path_builds(kind, data):
    event = data.draw(events(kind))
    payload = REGISTRY.encode(event)
    fast = REGISTRY.payload_decoder(kind.transfer)(payload)
    slow = REGISTRY.decode(payload, kind.family, kind.transfer)
    assert _shape(fast) == _shape(slow) == _shape(event)
    assert fast == slow and hash(fast) == hash(slow)


@pytest.mark.parametrize("kind", JOURNALLED, ids=lambda k: k.tag)
@SETTINGS
@given(data=st.data())
def test_damaged_payloads_decode_as_the_dict_path_does_or_are_declined(kind, data):
    payload = damaged(data, REGISTRY.encode(data.draw(events(kind))), ("set", "insert", "delete"))
    fast = REGISTRY.payload_decoder(kind.transfer)(payload)
    if fast is not None:
        assert _shape(fast) == _shape(REGISTRY.decode(payload, kind.family, kind.transfer))


def _map(pairs) -> bytes:
    """A msgpack map of these (key, value) pairs, as written (duplicates kept; map16 past 15)."""
    head = bytes([0x80 | len(pairs)]) if len(pairs) <= 15 else b"\xde" + len(pairs).to_bytes(2, "big")
    return head + b"".join(msgpack.packb(k) + msgpack.packb(v, use_bin_type=True) for k, v in pairs)


RETIRED = next(k for k in JOURNALLED if k.tag == "receipts.retired")


@settings(SETTINGS, max_examples=5)
@given(event=events(RETIRED))
def test_what_the_payload_decoder_declines(event):
    kind = RETIRED
    decode = REGISTRY.payload_decoder(kind.transfer)
    body = unpack_body(REGISTRY.encode(event))
    pairs = list(body.items())
    assert _shape(decode(_map(pairs))) == _shape(REGISTRY.decode(_map(pairs), kind.family))
    # a key twice (the dict path keeps the last value: the map must count exactly the kind's keys)
    assert decode(_map(pairs[:-1] + [(pairs[-1][0], 1), pairs[-1]])) is None
    # the same map with a map16 header: declined here, decoded by the dict path as always
    long = b"\xde" + len(pairs).to_bytes(2, "big") + _map(pairs)[1:]
    assert decode(long) is None and REGISTRY.decode(long, kind.family) == REGISTRY.decode(_map(pairs), kind.family)
    for bad in ([(k, True if k == "retry_floor" else v) for k, v in pairs],    # a boolean for an integer
                [(k, -1 if k == "retry_floor" else v) for k, v in pairs],
                [(k, v.hex() if isinstance(v, bytes) else v) for k, v in pairs],   # a string for bytes
                [(k, 2 if k == "v" else v) for k, v in pairs],                   # another version
                pairs[:-1], pairs + [("extra", 1)]):
        assert decode(_map(bad)) is None
    assert decode(_map(pairs) + b"\x00") is None   # trailing bytes
    # a state event's body in another transfer kind's decoder
    assert REGISTRY.payload_decoder(TransferKind.ADMISSION)(_map(pairs)) is None


@settings(SETTINGS, max_examples=5)
@given(event=events(RETIRED))
def test_a_decoded_transfer_unpacks_its_body_when_read(event):
    assert int(TransferKind.RETIREMENT) in PAYLOAD_DECODERS   # aotx.state registered it
    payload = REGISTRY.encode(event)
    data = b"".join(encode_transfer(TransferKind.RETIREMENT, 7, 99, payload)[1])
    (t,) = whole_transfers(data, {}, {})
    assert t.event == event and "body" not in vars(t)
    assert t.body == unpack_body(payload) and vars(t)["body"] is t.body
    assert t == Transfer(TransferKind.RETIREMENT, 7, 99, payload, unpack_body(payload))


DEFERRABLE = [k for k in JOURNALLED if k.check is not None]


def test_every_kind_without_a_decode_leaf_can_be_deferred():
    assert "member.rights_set" in {k.tag for k in DEFERRABLE}


@pytest.mark.parametrize("kind", DEFERRABLE, ids=lambda k: k.tag)
@SETTINGS
@given(data=st.data())
def test_a_deferred_kind_decodes_to_its_checked_struct_which_builds_what_the_dict_path_builds(kind, data):
    """A deferred kind's decoder yields its Struct, checked as its builder checks it: where it yields one (intact
    or damaged payloads), building it gives what the dict path decodes; where the dict path refuses, it declines."""
    from aotx.journal.transfer import WIRE_BUILDERS
    payload = bytearray(REGISTRY.encode(data.draw(events(kind))))
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.integers(0, 255))
    decode = REGISTRY.payload_decoder(kind.transfer, frozenset({kind.cls}))
    wire = decode(bytes(payload))
    if wire is None:
        return
    assert type(wire) is kind.struct
    built = kind.build(wire)
    assert _shape(built) == _shape(REGISTRY.decode(bytes(payload), kind.family, kind.transfer))
    if kind.struct in WIRE_BUILDERS:
        assert WIRE_BUILDERS[kind.struct] is kind.build


def test_a_deferred_kinds_unchecked_leaf_is_declined():
    """member.rights_set's `rights` is read as an int: one that is no Rights value is declined (its builder
    would refuse it), so the dict path names the fault."""
    kind = next(k for k in DEFERRABLE if k.tag == "member.rights_set")
    pairs = [(k, v) for k, v in unpack_body(REGISTRY.encode(_member_event())).items()]
    pairs = [(k, 0xFF if k == "rights" else v) for k, v in pairs]
    assert REGISTRY.payload_decoder(kind.transfer, frozenset({kind.cls}))(_map(pairs)) is None
    with pytest.raises(kind.family.error):
        REGISTRY.decode(_map(pairs), kind.family, kind.transfer)


def _member_event():
    from aotx.state.events import MemberRightsSet, OpHeader
    from aotx.state.vocab import Rights
    op = OpHeader(bytes(range(16)), 3, bytes(8) + bytes(range(8)), bytes(range(1, 17)), b'{"x":1}')
    return MemberRightsSet(op, bytes(16), bytes([1] * 16), bytes([2] * 16), bytes([3] * 16), Rights(1))


def test_a_fast_path_transfer_of_a_deferred_kind_builds_its_event_on_first_read():
    from aotx.journal.transfer import WIRE_BUILDERS
    event = _member_event()
    payload = REGISTRY.encode(event)
    digest, records = encode_transfer(int(TransferKind.MUTATION), 5, 77, payload)
    (t,) = whole_transfers(b"".join(records), {}, {})
    assert type(t.__dict__["wire"]) in WIRE_BUILDERS and "event" not in t.__dict__ and "body" not in t.__dict__
    assert _shape(t.event) == _shape(event) and t.__dict__["event"] is t.event   # built once, then kept
    assert t.body == unpack_body(payload) and t.digest == digest
    assert t == Transfer(int(TransferKind.MUTATION), 5, 77, payload, unpack_body(payload), event)


def test_a_map_keyed_by_a_map_is_declined_not_raised():
    """Found by the damaged-payload property above (session 10): msgspec raises TypeError (an unhashable
    key) for a map whose key is itself a map, in a field it does not type; the decoder declines it and
    the dict path refuses it with its codec error."""
    kind = next(k for k in JOURNALLED if k.tag == "stored.response.deleted")
    payload = (b"\x84\xa4kind\xb7stored.response.deleted\xa1v\x01\xa8identity\x82\x00\xca\x00\xa30\xc4\x80"
               b"\xa8response\xbdresp_000000000000000000000000")
    assert REGISTRY.payload_decoder(kind.transfer)(payload) is None
    with pytest.raises(StoredCodecError, match="not msgpack: unhashable"):
        REGISTRY.decode(payload, kind.family, kind.transfer)


@pytest.mark.parametrize("kind", JOURNALLED, ids=lambda k: k.tag)
@settings(SETTINGS, max_examples=3)
@given(data=st.data())
def test_every_kinds_map_header_must_count_exactly_its_keys(kind, data):
    """The decoder compares a payload's map header with the kind's key count (its first byte, and a map16's
    count after it): a key written twice (the header counting one more) or the other header form is declined,
    for kinds of up to 15 keys (fixmap) and of more (map16, memory.retained) alike."""
    decode = REGISTRY.payload_decoder(kind.transfer)
    pairs = list(unpack_body(REGISTRY.encode(data.draw(events(kind)))).items())
    assert decode(_map(pairs)) is not None
    assert decode(_map(pairs[:-1] + [(pairs[-1][0], pairs[-1][1]), pairs[-1]])) is None   # the last key twice
    other = (b"\xde" + len(pairs).to_bytes(2, "big") if len(pairs) <= 15 else
             b"\xdf" + len(pairs).to_bytes(4, "big"))   # the same count as map16 (or map32)
    assert decode(other + _map(pairs)[1 if len(pairs) <= 15 else 3:]) is None
