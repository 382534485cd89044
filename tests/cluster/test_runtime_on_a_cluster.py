"""A state-only runtime on the 3-node cluster: its writes survive a node fault (the stream leader's
SIGKILL, a follower's SIGKILL, the leader SIGSTOPped past the RAFT election timeout), the retries of
the ones in doubt are exact, and a fresh replay equals the live state (issue 15 parts 1 and 4)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from aotx.runtime import SharedRuntime, submit_body
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import ConcurrencyConflict, MemoryRecorder, StreamSpec

from .conftest import node_named

ACTORS = [Actor(f"c{i}", Grants.all()) for i in range(3)]
RETRYABLE = {429, 503, 504}


def body(actor: Actor, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(actor.principal).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


async def submit_until_saved(rt, actor, kind, raw, resource=None, deadline_s=90.0):
    """The same bytes again until the runtime answers other than 'retry later' (hold, unavailable)."""
    deadline = time.monotonic() + deadline_s
    while True:
        out = await submit_body(rt, actor, kind, raw, resource)
        if out.status not in RETRYABLE or time.monotonic() > deadline:
            return out
        await asyncio.sleep(0.1)


FAULTS = ("kill the stream leader", "kill a follower", "stop the stream leader past the election timeout")


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_runtime_keeps_every_acknowledged_write_across_a_node_fault(cluster, fault):
    n = FAULTS.index(fault)
    spec = StreamSpec(name=f"RTCLUSTER{n}", subject_prefix=f"rtc{n}.j")
    rt = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth()).start()
    ledger: dict[tuple[str, int], dict] = {}
    try:
        info = await rt.recorder.js.stream_info(spec.name)
        assert info.config.num_replicas == 3

        async def participant(actor: Actor, killed: asyncio.Event, rounds: int) -> None:
            out = await submit_until_saved(rt, actor, MutationKind.REGISTER, body(actor, 1))
            assert out.status == 201, out.body
            ledger[(actor.principal, 1)] = out.body
            out = await submit_until_saved(rt, actor, MutationKind.CREATE_SPACE, body(actor, 2, scope="private"))
            assert out.status == 201, out.body
            ledger[(actor.principal, 2)] = out.body
            space = out.body["resource"]
            for seq in range(3, 3 + rounds):
                if seq == 6:
                    await killed.wait()
                out = await submit_until_saved(rt, actor, MutationKind.CREATE_CONVERSATION, body(actor, seq), space)
                assert out.status in (200, 201), out.body
                ledger[(actor.principal, seq)] = out.body

        killed = asyncio.Event()
        workers = [asyncio.create_task(participant(a, killed, 8)) for a in ACTORS]
        while len(ledger) < 3 * 4:   # some writes acknowledged before the kill
            await asyncio.sleep(0.02)
        leader = node_named(cluster, (await rt.recorder.js.stream_info(spec.name)).cluster.leader)
        victim = leader if fault != FAULTS[1] else next(x for x in cluster.nodes if x is not leader)
        index = cluster.nodes.index(victim)
        if fault == FAULTS[2]:
            victim.pause()   # SIGSTOP: sockets open, nothing answered; RAFT elects another leader
        else:
            victim.kill()
        killed.set()
        try:
            await asyncio.gather(*workers)
        finally:
            if fault == FAULTS[2]:
                victim.resume()
                await cluster.wait_jetstream(60)
            else:
                await cluster.restart_async(index)
        for (name, seq), receipt in ledger.items():   # every acknowledged receipt, byte for byte
            actor = next(a for a in ACTORS if a.principal == name)
            again = await submit_body(rt, actor, *_replay_of(actor, seq, ledger))
            assert again.status == 200 and again.body == receipt, (name, seq)
        fresh = await SharedRuntime(cluster.urls, spec, progress=False, nats_auth=cluster.auth()).start()
        try:
            assert fresh.state_hash() == rt.state_hash()
        finally:
            await fresh.stop()
    finally:
        await rt.stop()


def _replay_of(actor: Actor, seq: int, ledger) -> tuple:
    """The exact command that was acknowledged at `seq` (kind, bytes, resource)."""
    if seq == 1:
        return MutationKind.REGISTER, body(actor, 1)
    if seq == 2:
        return MutationKind.CREATE_SPACE, body(actor, 2, scope="private")
    return MutationKind.CREATE_CONVERSATION, body(actor, seq), ledger[(actor.principal, 2)]["resource"]


class ClusterLikeRecorder(MemoryRecorder):
    """The in-memory log, refusing the first guarded append of each subject once, as a clustered
    stream's leader does while it still applies the subject's previous message (the log holds
    exactly what the writer expected: no other writer explains the refusal)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[str] = set()

    async def append(self, subject, payload, msg_id=None, expected_last_subject_seq=None):
        if expected_last_subject_seq is not None and subject not in self.refused:
            self.refused.add(subject)
            raise ConcurrencyConflict(subject, expected_last_subject_seq, "err_code=10164 (injected)")
        return await super().append(subject, payload, msg_id, expected_last_subject_seq)

    async def last_subject_seq(self, subject: str) -> int:
        return max((m.seq for m in self._messages if m.subject == subject), default=0)


async def test_a_guard_refusal_no_other_writer_explains_is_tried_again_not_answered_409():
    rec = ClusterLikeRecorder()
    rt = await SharedRuntime(recorder=rec, progress=False).start()
    try:
        actor = ACTORS[0]
        out = await submit_body(rt, actor, MutationKind.REGISTER, body(actor, 1))
        assert out.status == 201, out.body
        out = await submit_body(rt, actor, MutationKind.CREATE_SPACE, body(actor, 2, scope="private"))
        assert out.status == 201, out.body
        assert rec.refused   # the refusal happened, and was tried again
    finally:
        await rt.stop()
