"""Golden msgpack bodies of memory.published and memory.revised (memory.retained: test_formats.py).

Frozen: a publication's memory event is journalled inside its memory.publication state event and
must decode forever."""

import pytest

from aotx.memory import MemoryOp, MemoryPublished, MemoryRevised, decode_memory_event, encode_memory_event

A = bytes(range(16))
OP = MemoryOp(A, 3, bytes([1] * 16))
HEAD = ("a17601"                                                        # "v": 1
        "a76c696e65616765c410000102030405060708090a0b0c0d0e0f"         # "lineage": bin16
        "a873657175656e636503"                                           # "sequence": 3
        "a96f7065726174696f6ec41001010101010101010101010101010101"      # "operation": bin16
        "a56163746f72c410000102030405060708090a0b0c0d0e0f")             # "actor": bin16
GOLDEN = [
    (MemoryPublished(OP, A, bytes([2] * 32), 2, bytes([3] * 16), 1, bytes([4] * 16), 1, bytes([5] * 16), 1,
                     bytes([6] * 16), bytes([7] * 16), bytes([8] * 16), b"hi", b"src", b"emb"),
     "de0014a46b696e64b06d656d6f72792e7075626c6973686564" + HEAD
     + "ab64657374696e6174696f6ec4200202020202020202020202020202020202020202020202020202020202020202"
     + "a573636f706502"
     + "ab6f726967696e5f74657874c41003030303030303030303030303030303" "b36f726967696e5f746578745f76657273696f6e01"
     + "ad6f726967696e5f736f75726365c41004040404040404040404040404040404"
     + "b56f726967696e5f736f757263655f76657273696f6e01"
     + "b06f726967696e5f656d62656464696e67c41005050505050505050505050505050505"
     + "b86f726967696e5f656d62656464696e675f76657273696f6e01"
     + "ab746578745f6f626a656374c41006060606060606060606060606060606"
     + "ad736f757263655f6f626a656374c41007070707070707070707070707070707"
     + "b0656d62656464696e675f6f626a656374c41008080808080808080808080808080808"
     + "a474657874c4026869" "a6736f75726365c403737263" "a9656d62656464696e67c403656d62"),
    (MemoryRevised(OP, A, bytes([3] * 16), 2, bytes([5] * 16), 2, b"new", b"vec"),
     "8ca46b696e64ae6d656d6f72792e72657669736564" + HEAD
     + "ab746578745f6f626a656374c41003030303030303030303030303030303" "ac746578745f76657273696f6e02"
     + "b0656d62656464696e675f6f626a656374c41005050505050505050505050505050505"
     + "b1656d62656464696e675f76657273696f6e02" "a474657874c4036e6577" "a9656d62656464696e67c403766563"),
]


@pytest.mark.parametrize("event, golden", GOLDEN, ids=lambda x: getattr(x, "KIND", ""))
def test_golden_bytes(event, golden):
    assert encode_memory_event(event).hex() == golden
    assert decode_memory_event(bytes.fromhex(golden)) == event
