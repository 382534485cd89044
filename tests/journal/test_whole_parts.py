"""aotx.journal.whole_parts: a multi-part transfer's parts checked in one go (generated per part count up to
MAX_GENERATED, part by part above) must answer what the record path answers: the same transfer for an intact
message, a refusal (the record path's error) for one with any byte of any part changed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aotx.journal import JournalFormatError, Reassembler
from aotx.journal.transfer import encode_transfer
from aotx.journal.record import HEADER_SIZE, MAX_BODY
from aotx.journal.whole import whole_transfers
from aotx.journal.whole_parts import MAX_GENERATED, parts_checker

LH = 0x0123456789ABCDEF


def _tick(payload_len: int) -> bytes:
    """One message holding a whole transfer of a msgpack payload (an emitter writes at most 16 records a tick:
    a message with more is built from the transfer's records, as a reader may still meet one)."""
    n = payload_len   # one msgpack bin value of exactly n bytes (bin 8 or bin 16 header)
    payload = b"\xc4" + bytes([n - 2]) + b"\x07" * (n - 2) if n - 2 <= 255 else \
        b"\xc5" + (n - 3).to_bytes(2, "big") + b"\x07" * (n - 3)
    return b"".join(encode_transfer(4242, 3, LH, payload)[1])


def _record_path(data: bytes):
    try:
        return [(t.kind, t.transfer_id, t.payload, t.digest) for t in Reassembler().feed_records(data, 1)]
    except JournalFormatError as exc:
        return ("error", type(exc).__name__, getattr(exc, "code", None))


@pytest.mark.parametrize("parts", [2, 3, 5, MAX_GENERATED, MAX_GENERATED + 1, 40])
def test_an_intact_transfer_of_any_part_count_is_taken_as_the_record_path_takes_it(parts):
    data = _tick(parts * MAX_BODY - 16 - 5)   # payload + 16-byte digest: `parts` records, the final one 155 bytes
    assert len(data) == parts * HEADER_SIZE + parts * MAX_BODY - 5
    fast = whole_transfers(data, {}, {})
    assert fast is not None and len(fast) == 1
    assert [(t.kind, t.transfer_id, t.payload, t.digest) for t in fast] == _record_path(data)


@settings(max_examples=150, deadline=None)
@given(parts=st.sampled_from([2, 4, MAX_GENERATED, MAX_GENERATED + 2]), last=st.integers(1, MAX_BODY),
       at=st.integers(0, 10**6), bit=st.integers(0, 7))
def test_a_changed_byte_anywhere_is_refused_as_the_record_path_refuses_it(parts, last, at, bit):
    data = bytearray(_tick((parts - 1) * MAX_BODY + last - 16))
    at %= len(data)
    data[at] ^= 1 << bit
    data = bytes(data)
    fast = whole_transfers(data, {}, {})
    slow = _record_path(data)
    if fast is None:   # declined: the record path names a fault
        assert slow[0] == "error"
    else:              # (a changed byte the records still frame and verify: none, with crc32c and the digest)
        assert [(t.kind, t.transfer_id, t.payload, t.digest) for t in fast] == slow


def test_each_part_count_has_one_checker_generated_up_to_the_bound():
    assert parts_checker(4) is parts_checker(4)
    assert parts_checker(MAX_GENERATED).__name__ == "check"
    assert parts_checker(MAX_GENERATED + 1).func.__name__ == "_loop"
