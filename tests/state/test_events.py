"""Golden msgpack bodies of every event, strict decoding, and a round trip through the type-37 journal."""

import msgpack
import pytest

from aotx.journal import Emitter, Reassembler, TransferKind, lineage_hash
from aotx.state import (ConversationCreated, EventCodecError, MemberRightsSet, MemoryPublicationRecorded, MutationKind,
                        OpHeader,
                        ParticipantRegistered, ReceiptsRetired, Rights, Scope, SpaceCreated, apply, decode_event,
                        empty_state, encode_event, from_body, state_hash, to_body, transfer_kind)
from aotx.journal.registry import REGISTRY

from .helpers import Driver

H = OpHeader(bytes(range(16)), 2, bytes([1] * 16), bytes([2] * 16), b"{}")
# kind tag, v, lineage, sequence, operation, operation_key, command — then each event's own fields
COMMON = ("a17601"                                                  # "v": 1
          "a76c696e65616765c410000102030405060708090a0b0c0d0e0f"   # "lineage": bin16
          "a873657175656e636502"                                    # "sequence": 2
          "a96f7065726174696f6ec41001010101010101010101010101010101"
          "ad6f7065726174696f6e5f6b6579c41002020202020202020202020202020202"
          "a7636f6d6d616e64c4027b7d")                               # "command": bin b"{}"
KIND = "a46b696e64"
GOLDEN = [
    (ParticipantRegistered(H, bytes([3] * 16)),
     "88" + KIND + "b67061727469636970616e742e72656769737465726564" + COMMON
     + "ab7061727469636970616e74c41003030303030303030303030303030303"),
    (ReceiptsRetired(H, 2),
     "88" + KIND + "b072656365697074732e72657469726564" + COMMON + "ab72657472795f666c6f6f7202"),
    (SpaceCreated(H, bytes([4] * 16), Scope.ROOM),
     "89" + KIND + "ad73706163652e63726561746564" + COMMON
     + "a57370616365c41004040404040404040404040404040404a573636f706502"),
    (MemberRightsSet(H, bytes([5] * 16), bytes([6] * 16), bytes([7] * 16), bytes([8] * 16),
                     Rights.READ | Rights.MANAGE),
     "8c" + KIND + "b16d656d6265722e7269676874735f736574" + COMMON
     + "ad73706163655f6c696e65616765c41005050505050505050505050505050505"
     + "a57370616365c41006060606060606060606060606060606"
     + "b37061727469636970616e745f6c696e65616765c41007070707070707070707070707070707"
     + "ab7061727469636970616e74c41008080808080808080808080808080808a672696768747305"),
    (ConversationCreated(H, bytes([5] * 16), bytes([6] * 16), bytes([9] * 16)),
     "8a" + KIND + "b4636f6e766572736174696f6e2e63726561746564" + COMMON
     + "ad73706163655f6c696e65616765c41005050505050505050505050505050505"
     + "a57370616365c41006060606060606060606060606060606"
     + "ac636f6e766572736174696f6ec41009090909090909090909090909090909"),
    # a publication: the destination space and the encoded aotx.memory MemoryPublished event (opaque here)
    (MemoryPublicationRecorded(H, bytes([5] * 16), bytes([6] * 16), b"\x81\xa1k\x01"),
     "8a" + KIND + "b26d656d6f72792e7075626c69636174696f6e" + COMMON
     + "ad73706163655f6c696e65616765c41005050505050505050505050505050505"
     + "a57370616365c41006060606060606060606060606060606"
     + "a66d656d6f7279c40481a16b01"),
]


@pytest.mark.parametrize("event, golden", GOLDEN, ids=lambda x: getattr(x, "KIND", ""))
def test_golden_bytes(event, golden):
    assert encode_event(event).hex() == golden
    assert REGISTRY.encode(event) == bytes.fromhex(golden)
    decoded = decode_event(bytes.fromhex(golden))
    assert decoded == event
    if isinstance(decoded, SpaceCreated):
        assert decoded.scope is Scope.ROOM
    assert REGISTRY.decode_as(type(event), to_body(event)) == event


def test_transfer_kinds():
    assert transfer_kind(GOLDEN[1][0]) == TransferKind.RETIREMENT
    assert all(transfer_kind(e) == TransferKind.MUTATION for e, _ in GOLDEN if not isinstance(e, ReceiptsRetired))


def body():
    return to_body(GOLDEN[2][0])


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b.update(kind="space.deleted"), "unknown event kind 'space.deleted'"),
    (lambda b: b.update(v=2), "unknown encoding version 2"),
    (lambda b: b.update(extra=1), "unknown field 'extra'"),
    (lambda b: b.pop("scope"), "missing field 'scope'"),
    (lambda b: b.update(scope=7), "expected scope 1, 2 or 3"),
    (lambda b: b.update(space=b"short"), "expected 16 bytes"),
    (lambda b: b.update(sequence=-1), "unsigned 64-bit"),
    (lambda b: b.update(sequence="2"), "unsigned 64-bit"),
    (lambda b: b.update(command="{}"), "expected bytes"),
])
def test_strict_decoding(mutate, message):
    b = body()
    mutate(b)
    with pytest.raises(EventCodecError, match=message):
        from_body(b)


def test_wrong_class_and_garbage():
    with pytest.raises(EventCodecError, match="expected a space.created event, got receipts.retired"):
        REGISTRY.decode_as(SpaceCreated, to_body(GOLDEN[1][0]))
    with pytest.raises(EventCodecError, match="not msgpack"):
        decode_event(b"\xc1")
    with pytest.raises(EventCodecError, match="must be a map"):
        from_body(msgpack.packb([1]))
    with pytest.raises(EventCodecError, match="rights bits"):
        from_body({**to_body(GOLDEN[3][0]), "rights": 8})


def test_events_through_the_type37_journal_replay_to_the_same_state():
    d = Driver()
    d.register("alice")
    d.send("alice", MutationKind.CREATE_SPACE, 2, 2, scope="instance")
    d.send("alice", MutationKind.CREATE_CONVERSATION, 3, 3, d.spc("alice", 2))
    d.send("alice", MutationKind.RETIRE, 4, 4, retry_floor="2")
    emitter = Emitter(lineage_hash(d.log[0].op.lineage))
    for event in d.log:
        emitter.submit_payload(transfer_kind(event), encode_event(event))
    reader, state = Reassembler(recovery=True), empty_state()
    for position, tick in enumerate(emitter.drain()):
        for transfer in reader.feed_message(tick.data, position):
            state = apply(state, from_body(transfer.body))
    assert state_hash(state) == state_hash(d.state)
