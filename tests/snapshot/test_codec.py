"""The snapshot byte format: golden bytes, decode∘encode = identity, and a restored projection that goes on
applying the journal exactly as the one it was taken from (= the full replay)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from aotx.journal import Reassembler
from aotx.memory import MemoryStore
from aotx.memory.store_parts import STORE_FIELDS, export_parts
from aotx.runtime.replay import Projector
from aotx.snapshot import (MAGIC, SnapshotHeader, SnapshotRefused, SnapshotUnready, decode_snapshot, encode_snapshot,
                           pack_snapshot, unpack_snapshot)
from aotx.snapshot.body import EXECUTION_FIELDS, SAVE_FIELDS, encode_body
from aotx.state import Capacities, MutationKind, Save
from aotx.state.execution import ExecutionRecord
from aotx.state.state import State
from aotx.stored import stored_digest
from aotx.stored.state import Book, ConversationRecord, KeyRecord, ResponseRecord, StoredState

from .compare import fingerprint, replay
from .journal import LogBuilder, rich_log, stored_records

GOLDEN = Path(__file__).with_name("golden")
TINY = Capacities(participants=2, spaces=2, conversations=2, members=2, receipts=2, command_bytes=1024,
                  result_bytes=256)


@pytest.fixture(scope="module")
def log() -> LogBuilder:
    return rich_log()


def test_a_snapshot_at_any_quiet_point_continues_as_the_full_replay(log):
    full = fingerprint(replay(log.messages))
    assert full == fingerprint(log.live)
    quiet = 0
    for cut in range(len(log.messages) + 1):
        prefix = replay(log.messages[:cut])
        if prefix.reassembler.open_transfers:   # inside the split output: no snapshot there
            continue
        quiet += 1
        header, restored = decode_snapshot(encode_snapshot(prefix))
        assert (header.covered, header.messages) == (cut, cut)
        assert fingerprint(restored) == fingerprint(prefix), f"restored at {cut}"
        restored.feed_many(log.messages[cut:])
        restored.finish()
        assert fingerprint(restored) == full, f"snapshot at {cut} + tail"
    assert len(log.messages) - 3 <= quiet < len(log.messages) + 1   # every cut but those inside the split output


def test_no_snapshot_while_a_transfer_is_open(log):
    cuts = [cut for cut in range(len(log.messages)) if replay(log.messages[:cut]).reassembler.open_transfers]
    assert cuts, "the log holds an output split over two messages"
    with pytest.raises(SnapshotUnready, match="open"):
        encode_snapshot(replay(log.messages[:cuts[0]]))


def test_encode_is_a_pure_function_and_decode_its_inverse(log):
    blob = encode_snapshot(log.live)
    assert encode_snapshot(log.live) == blob
    assert encode_snapshot(replay(log.messages)) == blob           # same history, other objects: same bytes
    _, restored = decode_snapshot(blob)
    assert encode_snapshot(restored) == blob
    assert all(not getattr(restored.state, t).flags.writeable
               for t in ("participants", "spaces", "conversations", "members", "receipts"))
    # the restored memory recalls as the original does
    space = next(row.owner for row, _, _ in export_parts(log.live.memory)["objects"])
    query = log.live.memory.matrix[0]
    assert [(r.score, r.text.id) for r in restored.memory.recall(space, query, 5)] == \
        [(r.score, r.text.id) for r in log.live.memory.recall(space, query, 5)]


def test_a_projection_whose_tables_grew_past_their_capacities_round_trips(log):
    """A log holding more rows than the capacities (two runtimes took a table's last row at once, or a
    log written under larger ones: aotx.state.growth) replays; its snapshot restores the same
    projection, which goes on applying as the full replay (issue 15)."""
    rows = Capacities(participants=1, spaces=1, conversations=1, members=1, receipts=2)   # (bytes bounds: the log's)
    grown = replay(log.messages, capacities=rows)
    s = grown.state
    assert len(s.receipts) > rows.receipts and s.n_spaces > rows.spaces and s.n_participants > rows.participants
    assert len(s.commands) == len(s.saves) == len(s.executions) == len(s.receipts)
    assert len(s.input_counts) == len(s.conversations)
    blob = encode_snapshot(grown)
    header, restored = decode_snapshot(blob)
    assert header.capacities == rows and fingerprint(restored) == fingerprint(grown)
    assert encode_snapshot(restored) == blob
    cut = len(log.messages) // 2
    while replay(log.messages[:cut], capacities=rows).reassembler.open_transfers:
        cut += 1
    _, half = decode_snapshot(encode_snapshot(replay(log.messages[:cut], capacities=rows)))
    half.feed_many(log.messages[cut:])
    assert fingerprint(half) == fingerprint(grown)


def test_the_format_carries_every_field_of_what_it_stores():
    """A field added to any of these changes what a snapshot must hold: give the format a new version."""
    assert tuple(f.name for f in dataclasses.fields(ExecutionRecord)) == EXECUTION_FIELDS
    assert tuple(f.name for f in dataclasses.fields(Save)) == SAVE_FIELDS
    assert tuple(vars(MemoryStore())) == STORE_FIELDS
    assert set(vars(Reassembler())) == {"recovery", "faults", "_open", "_last_id"}
    assert [f.name for f in dataclasses.fields(State)] == [
        "capacities", "participants", "spaces", "conversations", "members", "receipts", "n_participants",
        "n_spaces", "n_conversations", "n_members", "commands", "saves", "executions", "input_counts", "applied",
        "_index"]
    assert [f.name for f in dataclasses.fields(Projector)] == [
        "source", "incarnation", "capacities", "state", "memory", "stored", "reassembler", "last_transfer",
        "last_subject_seq", "applied_seq", "chains", "boots", "messages", "transfers"]
    # (applied_seq is derived: the max of last_subject_seq, the header's covered sequence; not in the body)
    # format 2: the stored state (aotx.stored.export writes each of these; sizes and totals are derived)
    assert [f.name for f in dataclasses.fields(StoredState)] == ["books", "totals", "applied", "_owned"]
    assert [f.name for f in dataclasses.fields(Book)] == ["responses", "conversations", "keys"]
    assert [f.name for f in dataclasses.fields(ResponseRecord)] == [
        "created", "status", "events", "finished", "cancel_requested", "size"]
    assert [f.name for f in dataclasses.fields(ConversationRecord)] == [
        "id", "created_at", "metadata", "item_ids", "items", "size"]
    assert [f.name for f in dataclasses.fields(KeyRecord)] == ["started", "chunks", "finished", "size"]


HEADER_HEX = (
    "414f5458534e4150" "0100" "9800" "00000000"            # magic, version 1, header length 152, reserved
    "a086010000000000" "9686010000000000"                  # covered 100000, messages 99990
    "00040000" "00040000" "00100000" "00100000" "00040000" "00200000" "00000100"   # capacities (defaults)
    "00000000" "0100000000000000"                          # reserved, body length 1
    "0c00" "414f54585f4a4f55524e414c"                      # "AOTX_JOURNAL"
    "2000" "323032362d31322d30315431303a30303a30302e3132333435362b30303a3030"  # the incarnation
)


def test_header_golden_bytes():
    """Format 2 has format 1's header layout; a version-1 header keeps decoding."""
    header = SnapshotHeader("AOTX_JOURNAL", "2026-12-01T10:00:00.123456+00:00", 100_000, 99_990, Capacities(), 1)
    blob = pack_snapshot(header, b"\x80")
    assert header.version == 2 and blob[:120].hex() == HEADER_HEX.replace("0100" "9800", "0200" "9800", 1)
    assert len(blob) == 152 + 1 and blob[-1:] == b"\x80"
    assert unpack_snapshot(blob)[0] == header and header.base == 10
    assert blob[120:152] == hashlib.blake2b(blob[:120] + b"\x80", digest_size=32, person=b"aotx-snapshot").digest()
    v1 = bytes.fromhex(HEADER_HEX)
    v1 += hashlib.blake2b(v1 + b"\x80", digest_size=32, person=b"aotx-snapshot").digest() + b"\x80"
    assert unpack_snapshot(v1)[0] == dataclasses.replace(header, version=1)


def _tiny() -> LogBuilder:
    b = LogBuilder(TINY)
    b.do("alice", MutationKind.REGISTER)
    b.do("alice", MutationKind.CREATE_SPACE, scope="room")
    return b


def test_small_snapshot_golden_bytes():
    """Format 1 as written on 2026-12-02 decodes forever, to the same projection (with no stored state);
    format 2 as written on 2026-12-08 (issue 11) is what the encoder writes now."""
    b = _tiny()
    header, restored = decode_snapshot((GOLDEN / "v1-small.aotxsnap").read_bytes())
    assert (header.version, header.stream, header.incarnation, header.covered, header.messages, header.capacities) \
        == (1, "SNAPTEST", "2026-12-01T00:00:00+00:00", 2, 2, TINY)
    assert fingerprint(restored) == fingerprint(b.live) and not restored.stored.books
    golden = (GOLDEN / "v2-small.aotxsnap").read_bytes()
    assert encode_snapshot(b.live) == golden
    header, restored = decode_snapshot(golden)
    assert (header.version, header.covered, header.messages) == (2, 2, 2)
    assert fingerprint(restored) == fingerprint(b.live)


def _tiny_stored() -> LogBuilder:
    b = _tiny()
    stored_records(b)
    return b


def test_stored_snapshot_golden_bytes():
    """Format 2 with stored responses, a conversation and idempotency keys, as written on 2026-12-08."""
    b = _tiny_stored()
    golden = (GOLDEN / "v2-stored.aotxsnap").read_bytes()
    assert encode_snapshot(b.live) == golden
    header, restored = decode_snapshot(golden)
    assert fingerprint(restored) == fingerprint(b.live) and restored.stored.totals.responses == 4
    assert stored_digest(restored.stored) == stored_digest(replay(b.messages, TINY).stored)


def _as_version(blob: bytes, version: int) -> bytes:
    """The same snapshot under another header version (digest renewed): only the body's checks refuse it."""
    length = int.from_bytes(blob[10:12], "little")
    head = blob[:8] + version.to_bytes(2, "little") + blob[10:length - 32]
    return head + hashlib.blake2b(head + blob[length:], digest_size=32, person=b"aotx-snapshot").digest() + blob[length:]


def json_copy(doc):
    return msgpack.unpackb(msgpack.packb(doc, use_bin_type=True), raw=False)


def _reframe(blob: bytes, body: bytes) -> bytes:
    """Another body under the same (re-digested) header: past the checksum, the body's own checks decide."""
    header, _ = unpack_snapshot(blob)
    return pack_snapshot(dataclasses.replace(header, body_length=len(body)), body)


def test_what_is_not_a_valid_snapshot_is_refused_with_its_reason(log):
    blob = encode_snapshot(_tiny().live)
    cases = {
        "format": [b"", b"AOTXSNA", b"NOTASNAP" + blob[8:], blob[:100], blob + b"\x00"],
        "version": [blob[:8] + b"\x03\x00" + blob[10:], blob[:8] + b"\x00\x00" + blob[10:]],
        "checksum": [blob[:20] + bytes([blob[20] ^ 1]) + blob[21:],            # covered, in the header
                     blob[:-5] + bytes([blob[-5] ^ 0x40]) + blob[-4:]],        # a byte of the body
    }
    doc = msgpack.unpackb(unpack_snapshot(blob)[1], raw=False)
    doc["state"]["tables"][0][1] = "[('lineage', '|u1', (8,))]"
    cases["body"] = [_reframe(blob, b"\xc1"), _reframe(blob, msgpack.packb({"state": {}})),
                     _reframe(blob, msgpack.packb(doc, use_bin_type=True))]
    # format 2 must carry the stored state, and only a well-formed one; format 1 must not carry it
    stored = msgpack.unpackb(unpack_snapshot(encode_snapshot(_tiny_stored().live))[1], raw=False)
    without = {k: v for k, v in stored.items() if k != "stored"}
    bad_record = json_copy(stored)
    bad_record["stored"]["books"][0][1]["responses"][0][1] = 99              # no such status
    twice = json_copy(stored)
    twice["stored"]["books"][0][1]["keys"] *= 2                              # a key named twice
    cases["body"] += [_reframe(blob, msgpack.packb(d, use_bin_type=True)) for d in (without, bad_record, twice)]
    cases["body"].append(_as_version(_reframe(blob, msgpack.packb(stored, use_bin_type=True)), 1))
    for reason, blobs in cases.items():
        for bad in blobs:
            with pytest.raises(SnapshotRefused) as refused:
                decode_snapshot(bad)
            assert refused.value.reason == reason, (reason, refused.value)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_flipped_bit_is_refused(data):
    blob = encode_snapshot(_tiny().live)
    at = data.draw(st.integers(0, len(blob) - 1), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    bad = blob[:at] + bytes([blob[at] ^ (1 << bit)]) + blob[at + 1:]
    with pytest.raises(SnapshotRefused):
        decode_snapshot(bad)


def test_the_magic_opens_every_snapshot(log):
    assert encode_snapshot(log.live).startswith(MAGIC) and encode_body(log.live)[:1] == b"\x85"   # a 5-key map


def test_the_projector_keeps_its_last_applied_sequence_as_it_goes(log):
    """`applied_seq` is a running value (the writer and the follower read it per message): after
    every message it is the highest stream sequence applied, a filler subject's included, and a
    restored snapshot carries it."""
    p = Projector("SNAPTEST", "2026-12-01T00:00:00+00:00")
    assert p.applied_seq == 0
    for subject, seq, data in log.messages:
        p.feed(subject, seq, data)
        assert p.applied_seq == seq == max(p.last_subject_seq.values())
    filler = log.messages[-1][1] + 1
    p.feed("snap.j.operator-filler", filler, b"x")   # not a tick subject: skipped, still applied
    assert p.applied_seq == filler
    _, restored = decode_snapshot(encode_snapshot(p))
    assert restored.applied_seq == filler
