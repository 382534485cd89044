"""Observers of applied journal messages (aotx.runtime.observers): any number can be added without
the writer knowing them; each hears every applied message with the parsed mutation its command
came with (never parsed again), and one observer's failure reaches neither the writer nor the others."""

from __future__ import annotations

import logging

from aotx.journal import TransferKind
from aotx.runtime import SharedRuntime, parse_submission
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog.memory import MemoryRecorder

from .test_group_commit import body

M = MutationKind
ALICE = Actor("alice", Grants.all())


async def test_an_added_observer_hears_every_applied_message_with_its_parsed_mutation():
    rt = await SharedRuntime(recorder=MemoryRecorder(), progress=False).start()
    heard = []
    rt.observers.add(heard.append)
    mutations = [parse_submission(M.REGISTER, body("alice", 1, 1)),
                 parse_submission(M.CREATE_SPACE, body("alice", 2, 2))]
    for m in mutations:
        assert (await rt.submit(ALICE, m)).status == 201
    assert [a.seq for a in heard] == [1, 2] and rt.projector.messages == 2
    assert heard[0].transfers[0].kind == TransferKind.CONTROL   # this boot's first write on the lineage
    for applied, m in zip(heard, mutations):
        assert applied.mutations[(lineage_for("alice"), m.envelope.sequence)] is m
    await rt.stop()


async def test_a_failing_observer_is_logged_and_changes_nothing_else(caplog):
    rt = await SharedRuntime(recorder=MemoryRecorder(), progress=False).start()

    def broken(applied):
        raise RuntimeError("observer bug (test)")
    heard = []
    rt.observers.add(broken)
    rt.observers.add(heard.append)
    with caplog.at_level(logging.ERROR, logger="aotx.runtime"):
        out = await rt.submit(ALICE, parse_submission(M.REGISTER, body("alice", 1, 1)))
    assert out.status == 201 and rt.failed is None and len(heard) == 1
    assert any("observer" in r.getMessage() and "journal message 1" in r.getMessage() for r in caplog.records)
    rt.observers.remove(broken)
    assert (await rt.submit(ALICE, parse_submission(M.CREATE_SPACE, body("alice", 2, 2)))).status == 201
    assert len(heard) == 2
    await rt.stop()
