"""Admission and lease in one append: an input admitted while nothing waits ahead of it in the
execution queue, whose page bound the engine grants at once, is leased in the same journal message
as its admission (or the same atomic batch); it starts only once both are saved and applied, in
order. Queued inputs are still leased by the execution queue; replay gives the same state."""

from __future__ import annotations

from aotx.journal import Reassembler, TransferKind
from aotx.runtime import SharedRuntime
from tests.waiting import wait_until_async

from .harness import fresh_spec, shared_app

TERMINAL = ("completed", "cancelled", "interrupted", "failed")


async def _setup(alice):
    await alice.sync()
    assert (await alice.post("/participant", alice.body()))[0] == 201
    status, sp = await alice.post("/spaces", alice.body(scope="room"))
    assert status == 201
    status, conv = await alice.post(f"/spaces/{sp['resource']}/conversations", alice.body())
    assert status == 201
    return conv["resource"]


async def _wait(party, op: str) -> dict:
    async def receipt() -> dict:
        status, body = await party.get(f"/operations/{op}")
        assert status == 200, body
        return body
    return await wait_until_async(receipt, f"{op} to end", done=lambda r: r["execution"] in TERMINAL)


async def _where(runtime) -> dict[int, list[int]]:
    """Journal message (stream sequence) → kinds of the transfers it completes."""
    r, out = Reassembler(recovery=True), {}
    async for msg in runtime.recorder.read(1):
        out[msg.seq] = [int(t.kind) for t in r.feed_message(msg.data, position=msg.seq)]
    return out


async def test_an_input_with_nothing_ahead_is_leased_in_its_admission_message(nats_url, service):
    spec = fresh_spec()
    async with shared_app(nats_url, spec, service=service) as (runtime, p, client):
        alice = p["alice"]
        con = await _setup(alice)
        before = runtime.projector.messages
        status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
            text="Say yes.", model=service.model_id, max_output_tokens=3))
        assert status == 202, receipt
        assert receipt["status"]["admission"] == "saved"
        assert receipt["execution"] in ("running", "completed")   # its lease was saved with its admission
        done = await _wait(alice, receipt["operation"])
        assert done["execution"] == "completed", done["result"]
        where = await _where(runtime)
        admission = [seq for seq, kinds in where.items() if TransferKind.ADMISSION in kinds]
        lease = [seq for seq, kinds in where.items() if TransferKind.LEASE in kinds]
        assert len(admission) == 1 and lease == admission          # one journal message: one append
        # no append of its own for the lease. (How many appends its outputs take depends on how the
        # engine's tokens meet the write rounds — a loaded machine splits them — so it is not counted.)
        assert not [seq for seq, kinds in where.items() if seq > before and kinds == [TransferKind.LEASE]]
        fresh = await SharedRuntime(nats_url, spec, progress=False).start()
        try:
            assert fresh.state_hash() == runtime.state_hash()
        finally:
            await fresh.stop()


async def test_inputs_behind_a_queue_are_leased_by_it(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice = p["alice"]
        con = await _setup(alice)
        ops = []
        for _ in range(6):   # more than the engine's batch: later ones wait in the queue
            status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
                text="Count to twenty.", model=service.model_id, max_output_tokens=12))
            assert status == 202, receipt
            ops.append(receipt["operation"])
        for op in ops:
            assert (await _wait(alice, op))["execution"] == "completed"
        where = await _where(runtime)
        leases = sum(kinds.count(TransferKind.LEASE) for kinds in where.values())
        assert leases == 6
