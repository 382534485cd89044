"""Golden bytes: media links, text limits, source records, embeddings, object IDs, event bodies."""

import hashlib

import msgpack
import numpy as np
import pytest

from aotx.memory import (LINK_BYTES, TEXT_LIMIT, MediaRef, MemoryCodecError, MemoryPayloadError, MemoryRetained,
                         SourceRecord, compose_text, decode_memory_event, embedding_bytes, embedding_from_bytes,
                         embedding_text, encode_memory_event, media_link, memory_event_body, memory_event_from_body,
                         memory_object_id)
from aotx.state import MemoryKind, Scope

from .helpers import retained, space_id, unit

SHA = "ab" * 32


def test_golden_media_link_is_73_bytes_of_text():
    assert media_link(MediaRef("image", SHA)) == b"\n[image:" + SHA.encode() + b"]"
    assert media_link(MediaRef("audio", SHA)) == b"\n[audio:" + SHA.encode() + b"]"
    assert LINK_BYTES == 73 == len(media_link(MediaRef("audio", SHA)))


def test_text_plus_links_fit_2048_utf8_bytes():
    refs = [MediaRef("image", SHA)] * 3
    fits = "é" * ((TEXT_LIMIT - 3 * 73) // 2)          # 914 two-byte characters = 1828 bytes
    assert len(compose_text(fits, refs)) == 1828 + 219
    assert len(compose_text("x" * (TEXT_LIMIT - 3 * 73), refs)) == TEXT_LIMIT
    with pytest.raises(MemoryPayloadError, match=r"text \(1830 bytes\) plus 3 media links \(73 bytes each\) "
                                                 r"is 2049 bytes, over 2048"):
        compose_text("x" * (TEXT_LIMIT - 3 * 73 + 1), refs)
    assert compose_text("", [MediaRef("audio", SHA)]) == media_link(MediaRef("audio", SHA))
    with pytest.raises(MemoryPayloadError, match="empty only with media"):
        compose_text("")
    with pytest.raises(MemoryPayloadError, match="at most 8"):
        compose_text("x", [MediaRef("image", SHA)] * 9)
    for bad in (("video", SHA), ("image", SHA.upper()), ("image", SHA[:-1])):
        with pytest.raises(MemoryPayloadError):
            MediaRef(*bad)
    assert embedding_text(compose_text("look at this", refs)) == "look at this"


def test_golden_source_record():
    r = SourceRecord(bytes(range(32)), bytes(range(32, 64)), 0x0102030405060708, b"\xee" * 16, 2)
    assert r.encode().hex() == (
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
        "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
        "0807060504030201" "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee" "02000000" "00000000")
    assert SourceRecord.decode(r.encode()) == r
    assert r.label() == "participant eeeeeeee in conversation 10111213"
    with pytest.raises(MemoryPayloadError, match="reserved"):
        SourceRecord.decode(r.encode()[:92] + b"\x01\x00\x00\x00")
    with pytest.raises(MemoryPayloadError, match="mode 3"):
        SourceRecord.decode(r.encode()[:88] + b"\x03\x00\x00\x00" + bytes(4))


def test_golden_embedding_bytes():
    v = np.zeros(384, np.float32)
    v[0], v[383] = 1.0, -0.5
    raw = embedding_bytes(v)
    assert len(raw) == 1536 and raw[:8].hex() == "0000803f00000000" and raw[-4:].hex() == "000000bf"
    assert np.array_equal(embedding_from_bytes(raw), v)
    with pytest.raises(MemoryPayloadError):
        embedding_bytes(np.zeros(383))
    with pytest.raises(MemoryPayloadError, match="non-finite"):
        embedding_from_bytes(b"\x00\x00\xc0\x7f" * 384)


def test_golden_object_ids():
    lineage, operation = bytes(range(16)), bytes(range(16, 32))
    assert memory_object_id(lineage, operation, MemoryKind.TEXT).hex() == "cfff94fc125e77e01aec7192b6ba7ef7"
    ids = {memory_object_id(lineage, operation, k) for k in MemoryKind}
    assert len(ids) == 4


def test_golden_retained_event_body():
    e = retained("alice", 3, space_id("alice", 1), Scope.PRIVATE, "hi", unit((0, 1.0)), interpretation="greeting")
    raw = encode_memory_event(e)
    assert len(raw) == 2040
    assert raw[:27] == b"\xde\x00\x12\xa4kind\xafmemory.retained\xa1v\x01"
    assert hashlib.sha256(raw).hexdigest() == "bd834608ec3498a7ae8290fdd30fdb814da1f320344e6720739959667aeb9907"
    assert list(msgpack.unpackb(raw, raw=False)) == [
        "kind", "v", "lineage", "sequence", "operation", "conversation", "space", "scope", "actor", "mode",
        "text_object", "source_object", "embedding_object", "interpretation_object", "text", "source", "embedding",
        "interpretation"]
    assert decode_memory_event(raw) == e


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b.update(kind="memory.forgotten"), "unknown memory event kind"),
    (lambda b: b.update(v=2), "unknown encoding version 2"),
    (lambda b: b.pop("space"), "missing field 'space'"),
    (lambda b: b.update(extra=1), "unknown field 'extra'"),
    (lambda b: b.update(space=bytes(16)), "field 'space': expected 32 bytes"),
    (lambda b: b.update(mode=-1), "field 'mode': expected an unsigned 64-bit integer"),
])
def test_strict_decoding(mutate, message):
    e = retained("alice", 3, space_id("alice", 1), Scope.PRIVATE, "hi", unit((0, 1.0)))
    body = memory_event_body(e)
    mutate(body)
    with pytest.raises(MemoryCodecError, match=message):
        memory_event_from_body(body)
    with pytest.raises(MemoryCodecError, match="not msgpack"):
        decode_memory_event(b"\xc1")
    assert isinstance(memory_event_from_body(memory_event_body(e)), MemoryRetained)
