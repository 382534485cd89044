"""Tick encoding (aotx.runtime.ticks): one function for commands and execution writes, the same
bytes the Emitter gives for each event's transfer, a boot control record once per boot and lineage."""

from __future__ import annotations

from aotx.journal import Emitter, Reassembler, TransferKind, lineage_hash
from aotx.runtime.replay import Projector, boot_control_body
from aotx.runtime.ticks import encode_ticks, transfer_of
from aotx.state import Execution, encode_event
from aotx.state.execution import InputCompleted, OutputAppended, execution_body
from tests.state.helpers import Driver

A = b"\x01" * 16


def test_each_event_kind_keeps_its_transfer_kind_and_payload():
    d = Driver()
    registered = d.register("alice").events[0]
    assert transfer_of(registered) == (int(TransferKind.MUTATION), encode_event(registered))
    done = InputCompleted(A, 2, Execution.COMPLETED, 3, 4, finish="stop")
    kind, payload = transfer_of(done)
    assert kind == int(TransferKind.COMPLETION)
    em = Emitter(7)
    em.submit(TransferKind.COMPLETION, execution_body(done))      # the execution path's former encoding
    other = Emitter(7)
    other.submit_payload(kind, payload)
    assert em.drain()[0].data == other.drain()[0].data


def test_a_boot_control_record_leads_a_lineage_not_yet_written_by_this_boot():
    proj = Projector(source="S", incarnation="I")
    groups = [[OutputAppended(A, 2, 0, b"x" * 10)], [], [InputCompleted(A, 2, Execution.COMPLETED, 1, 1, finish="stop")]]
    ticks, where = encode_ticks(proj, "boot-1", A, groups)
    assert where == [0, -1, 0]
    transfers = Reassembler(recovery=True).feed_message(ticks[0].data)
    assert [t.kind for t in transfers] == [TransferKind.CONTROL, TransferKind.OUTPUT, TransferKind.COMPLETION]
    assert transfers[0].body == boot_control_body("boot-1") and [t.transfer_id for t in transfers] == [1, 2, 3]
    # once the projector knows this boot wrote the lineage, ids go on and no control record is repeated
    proj.boots[lineage_hash(A)], proj.last_transfer[lineage_hash(A)] = "boot-1", 3
    ticks, _ = encode_ticks(proj, "boot-1", A, [[OutputAppended(A, 2, 10, b"y")]])
    (only,) = Reassembler(recovery=True).feed_message(ticks[0].data)
    assert (only.kind, only.transfer_id) == (TransferKind.OUTPUT, 4)


def test_a_group_waits_for_the_tick_completing_its_last_transfer():
    proj = Projector(source="S", incarnation="I")
    big = [OutputAppended(A, 2, 0, bytes(3000))]        # ≈ 20 records: spans two ticks
    small = [OutputAppended(A, 3, 0, b"z")]
    ticks, where = encode_ticks(proj, "b", A, [small, big, small])
    assert len(ticks) == 2 and where == [0, 1, 1]


def test_a_stored_rounds_ticks_hold_whole_transfers():
    """encode_ticks(whole=True), as the stored round encodes: 32 transfers of 6 records each go two to a
    tick (12 of 16 records) rather than straddling ticks, so every tick carries its transfers and the
    writer applies them without framing its own bytes again."""
    proj = Projector(source="S", incarnation="I")
    proj.boots[lineage_hash(A)] = "b"
    groups = [[OutputAppended(A, n, 0, bytes(800))] for n in range(32)]
    ticks, where = encode_ticks(proj, "b", A, groups, whole=True)
    assert len(ticks) == 16 and all(t.records == 12 and len(t.transfers) == 2 for t in ticks)
    assert where == [n // 2 for n in range(32)]
    straddling, _ = encode_ticks(proj, "b", A, groups)
    assert b"".join(t.data for t in ticks) == b"".join(t.data for t in straddling)


def test_whole_packing_never_turns_a_chain_of_appends_into_a_batch():
    """8 transfers of 6 records: whole packing would make 4 ticks (a batch from CHAIN_MIN = 4 on) where the
    default cut makes 3 (a chain of 3 acks): with `chain_min` the round keeps the default cut, so the
    writer's append (chain or batch) is what it was; 32 of them go whole (a batch either way)."""
    proj = Projector(source="S", incarnation="I")
    proj.boots[lineage_hash(A)] = "b"
    eight = [[OutputAppended(A, n, 0, bytes(800))] for n in range(8)]
    assert len(encode_ticks(proj, "b", A, eight, whole=True)[0]) == 4
    ticks, _ = encode_ticks(proj, "b", A, eight, whole=True, chain_min=4)
    assert len(ticks) == 3 and b"".join(t.data for t in ticks) == b"".join(t.data for t in encode_ticks(proj, "b", A, eight)[0])
    thirty_two = [[OutputAppended(A, n, 0, bytes(800))] for n in range(32)]
    ticks, _ = encode_ticks(proj, "b", A, thirty_two, whole=True, chain_min=4)
    assert len(ticks) == 16 and all(t.transfers for t in ticks)
    two = eight[:2]      # 12 records: one tick either way
    assert len(encode_ticks(proj, "b", A, two, whole=True, chain_min=4)[0]) == 1
