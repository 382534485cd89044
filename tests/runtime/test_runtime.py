"""The runtime directly over a real nats-server: two writers on one lineage, fail-closed boot."""

from __future__ import annotations

import json

import pytest

from aotx.journal import Emitter, TransferKind, lineage_hash
from aotx.runtime import ReplayError, SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import EmbeddedNats, StreamSpec

ALICE = Actor("alice", Grants.all())


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory):
    with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server.client_url()  # the embedded server's user and password in the URL


def body(seq: int, key: int = 1, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for("alice").hex(),
                       "operation_key": f"{key:032x}", "sequence": str(seq), **fields}).encode()


async def test_second_writer_conflicts_then_sees_the_first(nats_url):
    spec = StreamSpec(name="RT_TWO", subject_prefix="rt2.j")
    a = await SharedRuntime(nats_url, spec, progress=False).start()
    b = await SharedRuntime(nats_url, spec, progress=False).start()
    try:
        first = await submit_body(a, ALICE, MutationKind.REGISTER, body(1))
        assert first.status == 201
        clash = await submit_body(b, ALICE, MutationKind.REGISTER, body(1))
        assert clash.status == 409 and "another writer" in clash.body["error"]["message"]
        assert b.state_hash() == a.state_hash()              # b read the log back
        again = await submit_body(b, ALICE, MutationKind.REGISTER, body(1))
        assert (again.status, again.body) == (200, first.body)
        nxt = await submit_body(b, ALICE, MutationKind.CREATE_SPACE, body(2, key=2))
        assert nxt.status == 201 and nxt.body["save"]["boot"] == b.boot_id
        c = await SharedRuntime(nats_url, spec, progress=False).start()
        assert c.state_hash() == b.state_hash()
        await c.stop()
    finally:
        await a.stop()
        await b.stop()


async def test_boot_fails_closed_on_a_partial_transfer(nats_url):
    spec = StreamSpec(name="RT_CUT", subject_prefix="rtc.j")
    a = await SharedRuntime(nats_url, spec, progress=False).start()
    try:
        assert (await submit_body(a, ALICE, MutationKind.REGISTER, body(1))).status == 201
        lh = lineage_hash(lineage_for("alice"))
        em = Emitter(lh, next_transfer_id=a.projector.last_transfer[lh] + 1)
        em.submit(TransferKind.MUTATION, {"pad": "z" * 4000})   # 26 records: 2 ticks; only the first lands
        subject = spec.subject(lineage_for("alice").hex(), "tick")
        await a.recorder.append(subject, em.tick().data,
                                expected_last_subject_seq=a.projector.last_subject_seq[subject])
    finally:
        await a.stop()
    with pytest.raises(ReplayError, match="incomplete"):
        await SharedRuntime(nats_url, spec, progress=False).start()


async def test_boot_fails_closed_on_a_foreign_record(nats_url):
    spec = StreamSpec(name="RT_BAD", subject_prefix="rtb.j")
    a = await SharedRuntime(nats_url, spec, progress=False).start()
    try:
        await a.recorder.append(spec.subject("0" * 32, "tick"), b"not a type-37 record")
    finally:
        await a.stop()
    with pytest.raises(ReplayError, match="message 1"):
        await SharedRuntime(nats_url, spec, progress=False).start()


async def test_a_write_after_another_writers_message_applies_it_first_in_stream_order(nats_url):
    """Two runtimes on one journal, each writing its own lineage (no follower): a's second ack comes
    after b's message, which a has not seen; a reads it back and applies it before its own, so its
    state stays a prefix of the stream (= a fresh replay), never one that skipped b's write."""
    spec = StreamSpec(name="RT_GAP", subject_prefix="rtg.j")
    bob = Actor("bob", Grants.all())
    a = await SharedRuntime(nats_url, spec, progress=False).start()
    b = await SharedRuntime(nats_url, spec, progress=False).start()
    try:
        assert (await submit_body(a, ALICE, MutationKind.REGISTER, body(1))).status == 201
        bob_body = json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for("bob").hex(),
                               "operation_key": f"{1:032x}", "sequence": "1"}).encode()
        assert (await submit_body(b, bob, MutationKind.REGISTER, bob_body)).status == 201
        out = await submit_body(a, ALICE, MutationKind.CREATE_SPACE, body(2, key=2, scope="private"))
        assert out.status == 201, out.body
        assert a.state.participant_row(lineage_for("bob")) is not None   # b's registration, read back
        fresh = await SharedRuntime(nats_url, spec, progress=False).start()
        try:
            assert fresh.state_hash() == a.state_hash()
        finally:
            await fresh.stop()
    finally:
        await a.stop()
        await b.stop()
