import numpy as np
import pytest

from aotx.state import (MEMORY_ROW_DTYPE, MemoryKind, MemoryRow, MemoryRowError, Scope, decode_memory_row,
                        encode_memory_row, memory_row_from_json, memory_row_json)

OWNER = bytes(range(16)) + bytes(range(16, 32))
ROW = MemoryRow(object=bytes([0xAA] * 16), version=3, kind=MemoryKind.TEXT, scope=Scope.ROOM, byte_length=300,
                owner=OWNER, room=OWNER, source=bytes([0xBB] * 16), actor=bytes([0xCC] * 16))
GOLDEN = bytes.fromhex(
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"   # object
    "0300000000000000"                   # version
    "0100" "0200"                        # kind text, scope room
    "2c010000"                           # byte length 300
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"   # owner
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"   # room
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"   # source
    "cccccccccccccccccccccccccccccccc")  # actor
JSON = {"object": "aa" * 16, "version": "3", "kind": "text", "scope": "room",
        "owner": "spc-000102030405060708090a0b0c0d0e0f-101112131415161718191a1b1c1d1e1f",
        "room": "spc-000102030405060708090a0b0c0d0e0f-101112131415161718191a1b1c1d1e1f",
        "byte_length": "300", "source": "bb" * 16, "actor": "cc" * 16}


def test_golden_bytes_and_size():
    assert len(GOLDEN) == 128 == MEMORY_ROW_DTYPE.itemsize
    assert encode_memory_row(ROW) == GOLDEN
    assert decode_memory_row(GOLDEN) == ROW


def test_numpy_dtype_reads_the_same_layout():
    arr = np.frombuffer(GOLDEN * 2, dtype=MEMORY_ROW_DTYPE)
    assert arr[1]["version"] == 3 and arr[1]["byte_length"] == 300 and arr[1]["scope"] == 2
    assert arr[1]["actor"].tobytes() == bytes([0xCC] * 16) and arr[1]["owner"].tobytes() == OWNER


def test_json_translation_both_ways():
    assert memory_row_json(ROW) == JSON
    assert memory_row_from_json(JSON) == ROW
    private = MemoryRow(bytes([1] * 16), 1, MemoryKind.EMBEDDING, Scope.PRIVATE, 0, OWNER, bytes(32), bytes(16),
                        bytes(16))
    doc = memory_row_json(private)
    assert doc["room"] is None and doc["source"] is None and doc["kind"] == "embedding"
    assert memory_row_from_json(doc) == private


@pytest.mark.parametrize("offset, value, message", [
    (24, b"\x09\x00", "unknown kind 9"),
    (26, b"\x00\x00", "unknown scope 0"),
    (16, bytes(8), "version 0"),
    (64, bytes(32), "room must be the space ID for room scope"),
    (0, bytes(16), "object must be nonzero"),
    (64, b"\x01" + bytes(31), "room must be its owning space's exact ID"),
])
def test_decode_refuses(offset, value, message):
    data = bytearray(GOLDEN)
    data[offset:offset + len(value)] = value
    with pytest.raises(MemoryRowError, match=message):
        decode_memory_row(bytes(data))


def test_length_and_json_errors():
    with pytest.raises(MemoryRowError, match="128 bytes, got 127"):
        decode_memory_row(GOLDEN[:-1])
    with pytest.raises(MemoryRowError, match="exactly the fields"):
        memory_row_from_json({**JSON, "extra": 1})
    with pytest.raises(MemoryRowError, match="version must be a canonical decimal"):
        memory_row_from_json({**JSON, "version": "03"})
    with pytest.raises(MemoryRowError, match="unknown kind"):
        memory_row_from_json({**JSON, "kind": "video"})
    with pytest.raises(MemoryRowError, match="must start with 'spc'"):
        memory_row_from_json({**JSON, "owner": "con-" + JSON["owner"][4:]})


@pytest.mark.parametrize("text", ["٣", "３", "²", "1²", "𝟏"])
@pytest.mark.parametrize("name", ["version", "byte_length"])
def test_json_counters_are_ascii_digits_only(name, text):
    # str.isdigit() holds for each; int() reads some as numbers and raises on others
    with pytest.raises(MemoryRowError, match=f"{name} must be a canonical decimal"):
        memory_row_from_json({**JSON, name: text})
