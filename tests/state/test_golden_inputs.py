"""Golden msgpack bodies of the input kinds: input.admitted, input.cancelled (state events) and the
execution transfers input.lease (lease bytes of revisions 3, 2 and 0), input.output, input.completion.

These bytes are frozen: every record ever journalled must decode forever, to the same event."""

import pytest

from aotx.journal import Lease, LeaseRevision, LeaseRow, TransferKind, pack_body, unpack_body
from aotx.state import InputAdmitted, InputCancelled, OpHeader, decode_event, encode_event, transfer_kind
from aotx.state.execution import InputCompleted, LeaseApplied, OutputAppended, execution_body, execution_from_body
from aotx.state.vocab import Execution

H = OpHeader(bytes(range(16)), 2, bytes([1] * 16), bytes([2] * 16), b"{}")
A = bytes(range(16))
KIND = "a46b696e64"
V1 = "a17601"
COMMON = ("a76c696e65616765c410000102030405060708090a0b0c0d0e0f"      # "lineage": bin16
          "a873657175656e636502"                                        # "sequence": 2
          "a96f7065726174696f6ec41001010101010101010101010101010101"
          "ad6f7065726174696f6e5f6b6579c41002020202020202020202020202020202"
          "a7636f6d6d616e64c4027b7d")                                   # "command": bin b"{}"
ACTOR = "a56163746f72c410000102030405060708090a0b0c0d0e0f"             # "actor": bin16

STATE_GOLDEN = [
    (InputAdmitted(H, bytes([5] * 16), bytes([6] * 16), bytes(range(32)), 64), TransferKind.ADMISSION,
     "8b" + KIND + "ae696e7075742e61646d6974746564" + V1 + COMMON
     + "b4636f6e766572736174696f6e5f6c696e65616765c41005050505050505050505050505050505"
     + "ac636f6e766572736174696f6ec41006060606060606060606060606060606"
     + "ac6d6f64656c5f646967657374c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
     + "aa706167655f6c696d697440"),
    (InputCancelled(H, bytes([5] * 16), bytes([6] * 16), 1), TransferKind.MUTATION,
     "8a" + KIND + "af696e7075742e63616e63656c6c6564" + V1 + COMMON
     + "b4636f6e766572736174696f6e5f6c696e65616765c41005050505050505050505050505050505"
     + "ac636f6e766572736174696f6ec41006060606060606060606060606060606"
     + "af7461726765745f73657175656e636501"),
]


@pytest.mark.parametrize("event, kind, golden", STATE_GOLDEN, ids=lambda x: getattr(x, "KIND", ""))
def test_input_state_event_golden_bytes(event, kind, golden):
    assert encode_event(event).hex() == golden
    assert decode_event(bytes.fromhex(golden)) == event
    assert transfer_kind(event) == kind


def _lease(rev: int) -> Lease:
    return Lease(LeaseRevision(rev), (LeaseRow(0, 7, 4, A, 1 if rev >= 2 else None),))


LEASE = "84" + KIND + "ab696e7075742e6c65617365" + V1 + ACTOR + "a56c65617365"
ROW = "00000000" "07000000" "0400000000000000" "000102030405060708090a0b0c0d0e0f"
EXECUTION_GOLDEN = [
    (LeaseApplied(A, _lease(3)), TransferKind.LEASE, LEASE + "c430" "01000000" "03000000" + ROW + "0100000000000000"),
    (LeaseApplied(A, _lease(2)), TransferKind.LEASE, LEASE + "c430" "01000000" "02000000" + ROW + "0100000000000000"),
    # revision 0: 32-byte rows without a mode word (decodes; apply refuses leases before revision 2)
    (LeaseApplied(A, _lease(0)), TransferKind.LEASE, LEASE + "c428" "01000000" "00000000" + ROW),
    (OutputAppended(A, 4, 1, b"ab"), TransferKind.OUTPUT,
     "86" + KIND + "ac696e7075742e6f7574707574" + V1 + ACTOR
     + "a873657175656e636504" "a66f666673657401" "a464617461c4026162"),
    (InputCompleted(A, 4, Execution.COMPLETED, 9, 2, "stop", ""), TransferKind.COMPLETION,
     "89" + KIND + "b0696e7075742e636f6d706c6574696f6e" + V1 + ACTOR
     + "a873657175656e636504" "a9657865637574696f6e03" "ac696e7075745f746f6b656e7309"
     + "ad6f75747075745f746f6b656e7302" "a666696e697368a473746f70" "a56572726f72a0"),
    (InputCompleted(A, 4, Execution.FAILED, 300, 0, "error", "é"), TransferKind.COMPLETION,
     "89" + KIND + "b0696e7075742e636f6d706c6574696f6e" + V1 + ACTOR
     + "a873657175656e636504" "a9657865637574696f6e06" "ac696e7075745f746f6b656e73cd012c"
     + "ad6f75747075745f746f6b656e7300" "a666696e697368a56572726f72" "a56572726f72a2c3a9"),
]


@pytest.mark.parametrize("event, kind, golden", EXECUTION_GOLDEN, ids=lambda x: getattr(x, "KIND", ""))
def test_execution_transfer_golden_bytes(event, kind, golden):
    assert pack_body(execution_body(event)).hex() == golden
    assert execution_from_body(kind, unpack_body(bytes.fromhex(golden))) == event
