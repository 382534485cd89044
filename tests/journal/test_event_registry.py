"""The one codec registry: every registered kind round-trips exactly; a damaged body or payload is
refused with its family's codec error, or decodes to a valid event — never another exception.

Instances are drawn from each class's own annotations (its wire types, aotx.journal.wire)."""

from __future__ import annotations

import dataclasses
import enum
import typing

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from aotx.journal import Lease, LeaseRevision, LeaseRow, pack_body
from aotx.journal.registry import REGISTRY, Kind
from aotx.journal.wire import U64_MAX, Fixed, Packed, Require, Unsigned
# importing aotx.state, aotx.memory and aotx.stored registers their kinds
import aotx.stored  # noqa: F401
from aotx.stored import ids as stored_ids
from aotx.memory import MemoryCodecError, MemoryOp, MemoryRevised, memory_event_from_body
from aotx.state import EventCodecError, OpHeader, ParticipantRegistered, Scope, SpaceCreated, from_body
from aotx.state.execution import InputCompleted, LeaseApplied, OutputAppended, execution_from_body
from aotx.state.vocab import Execution

TAGS = {"participant.registered", "receipts.retired", "space.created", "member.rights_set", "conversation.created",
        "input.admitted", "input.cancelled", "memory.publication", "input.lease", "input.output",
        "input.completion", "memory.retained", "memory.published", "memory.revised",
        "stored.response.created", "stored.response.events", "stored.response.cancel_requested",
        "stored.response.finished", "stored.response.deleted", "stored.conversation.created",
        "stored.conversation.items_added", "stored.conversation.item_deleted", "stored.conversation.metadata_set",
        "stored.conversation.deleted", "stored.key.started", "stored.key.answered", "stored.key.finished",
        "stored.expired"}
KINDS = sorted(REGISTRY.kinds(), key=lambda k: k.tag)
# Each of the three properties runs once per kind (len(KINDS) = 30 and more): a quarter of the profile's
# examples per kind is still thousands of fresh examples a run, in a fraction of the suite's time.
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    max_examples=max(10, settings.default.max_examples // 4))


def leases() -> st.SearchStrategy[Lease]:
    def rows(rev: LeaseRevision):
        mode = st.none() if not rev.has_mode else st.sampled_from([1, 2])
        row = st.builds(LeaseRow, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, U64_MAX),
                        st.binary(min_size=16, max_size=16), mode)
        return st.lists(row, min_size=1, max_size=4, unique_by=(lambda r: r.request_index, lambda r: r.slot))
    return st.sampled_from(list(LeaseRevision)).flatmap(lambda rev: rows(rev).map(lambda r: Lease(rev, tuple(r))))


PACKED = {Lease: leases()}
_HEX = st.text("0123456789abcdef", min_size=24, max_size=64)
_IDS = {"response": _HEX.map("resp_{}".format), "conversation": _HEX.map("conv_{}".format),
        "item": st.tuples(st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12), _HEX).map("_".join)}
# the stored ids' wire types test their values (Require): draw values they accept, then let the filter check
REQUIRED = {
    stored_ids.is_identity: st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]),
                                    min_size=1, max_size=24),
    stored_ids.is_response_id: _IDS["response"], stored_ids.is_conversation_id: _IDS["conversation"],
    stored_ids.is_item_id: _IDS["item"], stored_ids.is_surface: st.sampled_from(stored_ids.SURFACES),
    stored_ids.is_key: st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), min_size=1, max_size=40),
}
REQUIRED_BY_WHY = {
    "not a response id or \"\"": st.just("") | _IDS["response"],
    "not a conversation id or \"\"": st.just("") | _IDS["conversation"],
    "not a list of distinct item ids": st.lists(_IDS["item"], max_size=3, unique=True).map(tuple),
    "not a list of distinct response ids": st.lists(_IDS["response"], max_size=3, unique=True).map(tuple),
    "not a list of surfaces": st.lists(st.sampled_from(stored_ids.SURFACES), max_size=3).map(tuple),
    "not a list of idempotency keys": st.lists(REQUIRED[stored_ids.is_key], max_size=3).map(tuple),
}


def of(hint: typing.Any) -> st.SearchStrategy:
    """A strategy for one field, from its wire type alone."""
    base, meta = (typing.get_args(hint)[0], typing.get_args(hint)[1:]) \
        if typing.get_origin(hint) is typing.Annotated else (hint, ())
    required = [m for m in meta if isinstance(m, Require)]
    if any(isinstance(m, Packed) for m in meta):
        out = PACKED[base]
    elif required and (required[0].test in REQUIRED or required[0].why in REQUIRED_BY_WHY):
        out = REQUIRED[required[0].test] if required[0].test in REQUIRED else REQUIRED_BY_WHY[required[0].why]
    elif base is bool:
        out = st.booleans()
    elif typing.get_origin(base) is tuple:
        item = typing.get_args(base)[0]
        out = st.lists(st.binary(max_size=24) if item is bytes else st.text(max_size=12), max_size=3).map(tuple)
    elif dataclasses.is_dataclass(base):
        hints = typing.get_type_hints(base, include_extras=True)
        out = st.builds(base, **{f.name: of(hints[f.name]) for f in dataclasses.fields(base)})
    elif base is bytes:
        size = next((m.size for m in meta if isinstance(m, Fixed)), None)
        out = st.binary(min_size=size, max_size=size) if size is not None else st.binary(max_size=48)
    elif base is int and any(isinstance(m, Unsigned) for m in meta):
        out = st.integers(0, U64_MAX)
    elif base is str:
        out = st.text(max_size=24)
    elif issubclass(base, enum.IntFlag):
        out = st.integers(0, sum(int(m) for m in base)).map(base)
    elif issubclass(base, enum.IntEnum):
        out = st.sampled_from(list(base))
    else:
        raise AssertionError(f"no strategy for {hint!r}")
    for r in (m for m in meta if isinstance(m, Require)):
        out = out.filter(r.test)
    return out


def events(kind: Kind) -> st.SearchStrategy:
    return of(kind.cls)


def test_every_journalled_kind_is_registered_once_with_its_family():
    assert {k.tag for k in KINDS} == TAGS
    assert all(k.version == 1 for k in KINDS)
    assert {k.family.name for k in KINDS} == {"event", "execution event", "memory event", "stored event"}


def _valid(event, kind: Kind) -> None:
    """A decoded event is a registered event of the family that re-encodes to itself."""
    assert REGISTRY.kind_of(event).family is kind.family
    assert REGISTRY.decode(REGISTRY.encode(event), kind.family) == event


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.tag)
@SETTINGS
@given(data=st.data())
def test_random_instances_round_trip_exactly(kind, data):
    event = data.draw(events(kind))
    payload = REGISTRY.encode(event)
    assert REGISTRY.decode(payload, kind.family) == event
    assert REGISTRY.encode(REGISTRY.decode(payload, kind.family)) == payload
    body = REGISTRY.body(event)
    assert list(body)[:2] == ["kind", "v"] and body["kind"] == kind.tag
    assert REGISTRY.decode_body(msgpack.unpackb(payload, raw=False), kind.family, kind.transfer) == event
    for other in {k.family for k in KINDS} - {kind.family}:  # families stay apart
        with pytest.raises(other.error, match=f"unknown {other.name} kind"):
            REGISTRY.decode_body(body, other)


def _shape(value):
    """A value with every nested event's type and instance dict spelled out (equality alone would not
    see an attribute the generated decoder left out or added)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), {k: _shape(v) for k, v in vars(value).items()})
    return (type(value), value)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.tag)
@settings(SETTINGS, max_examples=10)
@given(data=st.data())
def test_the_generated_decoder_builds_what_the_class_builds(kind, data):
    """aotx.journal.fast_decode: each kind's generated decoder gives the instance that decoding leaf by
    leaf and calling the class gives — same types, same instance dicts, equal and with the same hash."""
    event = data.draw(events(kind))
    body = msgpack.unpackb(REGISTRY.encode(event), raw=False)
    fast = kind.fast(body)
    slow = kind.schema.make([leaf.decode(body[leaf.key]) for leaf in kind.schema.leaves])
    assert _shape(fast) == _shape(slow) == _shape(event)
    assert fast == slow and hash(fast) == hash(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, dataclasses.fields(fast)[0].name, None)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.tag)
@SETTINGS
@given(data=st.data())
def test_the_generated_body_builder_builds_what_the_leaves_build(kind, data):
    """aotx.journal.fast_encode: each kind's generated body builder gives the map that encoding leaf by leaf
    gives — the same keys in the same order, the same values of the same types (so the same msgpack bytes)."""
    event = data.draw(events(kind))
    slow = {"kind": kind.tag, "v": kind.version}
    for leaf, value in zip(kind.schema.leaves, kind.schema.get(event)):
        slow[leaf.key] = leaf.encode(value)
    fast = kind.fast_body(event)
    assert list(fast.items()) == list(slow.items())
    assert [type(v) for v in fast.values()] == [type(v) for v in slow.values()]
    assert msgpack.packb(fast, use_bin_type=True) == msgpack.packb(slow, use_bin_type=True)


def damaged(data, payload: bytes, hows) -> bytes:
    """`payload` with 1 to 3 damages drawn from `hows`: set a byte, insert 1-4 bytes, delete 1-4 bytes,
    truncate (cut the rest)."""
    payload = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(payload)))
        how = data.draw(st.sampled_from(list(hows)))
        if how == "set" and at < len(payload):
            payload[at] = data.draw(st.integers(0, 255))
        elif how == "insert":
            payload[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif how == "delete":
            del payload[at:at + data.draw(st.integers(1, 4))]
        elif how == "truncate":
            del payload[at:]
    return bytes(payload)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.tag)
@SETTINGS
@given(data=st.data())
def test_damaged_bytes_refuse_with_the_codec_error_or_decode_valid(kind, data):
    payload = damaged(data, REGISTRY.encode(data.draw(events(kind))), ("set", "insert", "delete", "truncate"))
    try:
        event = REGISTRY.decode(payload, kind.family)
    except kind.family.error:
        return
    _valid(event, kind)


ints = st.integers(-2**63, U64_MAX)  # what msgpack can carry
values = st.recursive(
    st.none() | st.booleans() | ints | st.floats() | st.text(max_size=8) | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4) | ints, inner, max_size=3),
    max_leaves=6)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.tag)
@SETTINGS
@given(data=st.data())
def test_damaged_bodies_refuse_with_the_codec_error_or_decode_valid(kind, data):
    body = REGISTRY.body(data.draw(events(kind)))
    key = data.draw(st.sampled_from(sorted(body)) | st.integers(-1, 2) | st.text(max_size=6))
    how = data.draw(st.sampled_from(["replace", "drop", "add"]))
    if how == "drop":
        body.pop(key, None)
    else:
        body[key] = data.draw(values)
    # through the bytes too: what the journal would have stored
    for decode in (lambda: REGISTRY.decode_body(body, kind.family),
                   lambda: REGISTRY.decode(pack_body(body), kind.family)):
        try:
            event = decode()
        except kind.family.error:
            continue
        _valid(event, kind)


A = bytes(range(16))
H = OpHeader(A, 2, A, A, b"{}")


@pytest.mark.parametrize("decode, error, example", [
    (from_body, EventCodecError, ParticipantRegistered(H, A)),
    (memory_event_from_body, MemoryCodecError, MemoryRevised(MemoryOp(A, 1, A), A, A, 2, A, 2, b"t", b"e")),
    (lambda body: execution_from_body(4, body), EventCodecError, OutputAppended(A, 4, 0, b"x")),
])
def test_unhashable_kind_and_mixed_key_types_refuse_with_the_codec_error(decode, error, example):
    with pytest.raises(error, match="unknown .*kind"):
        decode({"kind": [1], "v": 1})
    with pytest.raises(error, match="unknown .*kind"):
        decode({"kind": {"a": 1}, "v": 1})
    with pytest.raises(error, match="unknown field"):
        decode({**REGISTRY.body(example), 7: 1, "zz": 2})


@pytest.mark.parametrize("event, error, message", [
    (SpaceCreated(H, b"short", Scope.ROOM), EventCodecError, "space.created field 'space': expected 16 bytes"),
    (SpaceCreated(OpHeader(A, -1, A, A, b"{}"), A, Scope.ROOM), EventCodecError,
     "field 'sequence': expected an unsigned"),
    (SpaceCreated(H, A, 7), EventCodecError, "field 'scope': expected scope 1, 2 or 3"),
    (InputCompleted(A, 4, Execution.RUNNING), EventCodecError, "field 'execution': running is not terminal"),
    (InputCompleted(A, 4, Execution.FAILED, finish=None), EventCodecError, "field 'finish': expected a string"),
    (LeaseApplied(A, Lease(LeaseRevision.R3, ())), EventCodecError, "field 'lease': lease header: row_count is 0"),
    (OutputAppended(b"x" * 15, 4, 0, b""), EventCodecError, "input.output field 'actor': expected 16 bytes"),
    (MemoryRevised(MemoryOp(A, 1, A), A, A, True, A, 2, b"t", b"e"), MemoryCodecError, "field 'text_version'"),
])
def test_what_is_written_decodes_an_event_its_fields_refuse_is_never_encoded(event, error, message):
    with pytest.raises(error, match=message):
        REGISTRY.encode(event)
