"""The replay's per-event shortcuts (aotx.projection.projector, aotx.state.derive) answer exactly what
the plain expressions they replace answer: the subject's lineage check, the Save built without its
`__init__`, and the BLAKE2b hashes computed from a prepared, copied hasher."""

from __future__ import annotations

import gc
import hashlib
import struct

import pytest
from hypothesis import given, strategies as st

from aotx.projection.projector import _save, _subject_lineage, chain
from aotx.state import Save
from aotx.state.derive import operation_id

HEXISH = st.text("0123456789abcdefABCDEF xg", max_size=34)
LINEAGE = st.binary(min_size=0, max_size=17)


@given(prefix=st.sampled_from(["p.j", "bench.j", "a", ""]), token=st.one_of(HEXISH, LINEAGE.map(bytes.hex)),
       lineage=LINEAGE)
def test_the_subject_lineage_check_is_the_split_and_hex_comparison(prefix, token, lineage):
    subject = f"{prefix}.{token}.tick"
    assert (_subject_lineage(subject) != lineage) == (subject.split(".")[-2] != lineage.hex())
    assert (_subject_lineage(subject) != bytes.fromhex(lineage.hex())) == (subject.split(".")[-2] != lineage.hex())


def test_a_replayed_save_is_the_save_its_init_builds():
    built = _save("S", "I", 7, "boot", "ab" * 32)
    plain = Save(source="S", incarnation="I", generation=7, boot="boot", commit_digest="ab" * 32, pending_bytes=0,
                 disk_error=None)
    assert built == plain and hash(built) == hash(plain) and vars(built) == vars(plain) and type(built) is Save


@given(lineage=st.binary(min_size=16, max_size=16), sequence=st.integers(0, 2**64 - 1),
       key=st.binary(min_size=16, max_size=16), previous=st.binary(max_size=32), digest=st.binary(max_size=32))
def test_the_prepared_hashers_hash_as_a_fresh_one(lineage, sequence, key, previous, digest):
    seq = struct.pack(">Q", sequence)
    assert operation_id(lineage, sequence, key) == seq + hashlib.blake2b(
        lineage + seq + key, digest_size=8, person=b"aotx-operation").digest()
    assert chain(previous, digest) == hashlib.blake2b(previous + digest, digest_size=32, person=b"aotx-commit").digest()


def test_a_batch_is_fed_with_the_cyclic_collector_paused_and_restored_after():
    """Projector.feed_many pauses gc for the batch (no await inside) and leaves it as it found it."""
    from aotx.projection import Projector

    seen: list[bool] = []
    p = Projector("S", "I")
    p._feed = lambda subject, seq, data, *_: seen.append(gc.isenabled())   # what the batch sees, per message
    assert gc.isenabled()
    assert p.feed_many([("x.f", 1, b""), ("x.f", 2, b"")]) == 2
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        p.feed_many([("x.f", 3, b"")])
        assert not gc.isenabled()   # a caller's own pause is kept
    finally:
        gc.enable()
    p._feed = lambda subject, seq, data, *_: 1 / 0
    with pytest.raises(ZeroDivisionError):
        p.feed_many([("x.f", 4, b"")])
    assert gc.isenabled()   # restored after a failure too
