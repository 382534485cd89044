"""One round of commands: plan (pure), encode, append, apply what landed, answer.

The planner decides the batch (aotx.runtime.planner); each lineage's accepted commands become one
flight of ticks (aotx.runtime.ticks) that the writer appends and applies (aotx.runtime.writer). A
command is answered after the ack of the tick that completes it; a flight that failed or was held
answers its commands that did not land with that refusal, and nothing of them is applied. Answers
decided on a pending state are given once every flight landed, else decided again next round, with
the commands that waited for another lineage's pending change (handed back to the group commit).

An admitted input the execution queue would lease at once gets its lease right behind its
admission in its lineage's flight (aotx.runtime.admission_lease: one append for both); the command
is answered after the tick completing its admission, as any command.
"""

from __future__ import annotations

from typing import Optional

from ..state import ExecutionContext, InputAdmitted, MemoryPublicationRecorded, SubmitInput
from .admission_lease import AdmissionLeases
from .catch_up import catch_up
from .group_commit import answer
from .input_trace import TRACE
from .planner import Cmd, PlanError, accepted_answer, plan_batch, publication_decider, settled
from .ticks import encode_ticks
from .writer import Flight, JournalWriter


async def command_round(writer: JournalWriter, batch: list[Cmd], context: Optional[ExecutionContext] = None,
                        leases: Optional[AdmissionLeases] = None) -> list[Cmd]:
    """Run one batch; returns the commands to decide again in the next batch (in batch order)."""
    refused = await writer.unready()
    if refused is None and writer.catch_up:   # follow mode: decide on the log as it is now (docs/SCALE.md §3)
        refused = await catch_up(writer)
    if refused is not None:
        answer(batch, refused)
        return []
    assert writer.projector is not None
    live = writer.projector.state
    plan = plan_batch(live, batch, context, publication_decider(writer.projector.memory))
    stamp_inputs(plan.flights, "round")
    for cmd in plan.final:
        _settle(writer, cmd, live)
    if plan.failed:
        writer.failed = plan.failed
        answer(batch, writer.failed_outcome())
        return []
    failed = False
    if plan.flights:
        leased = _lease_admissions(writer, plan.flights, leases)
        try:
            flights = await _fly(writer, plan.flights, batch)
        finally:
            if leased:
                leases.admissions_settled(leased)
        failed = any(f.error is not None for f in flights)
    again = plan.wait
    if plan.later:
        if writer.failed or failed:
            again = plan.later + again   # decided on a state that did not all land: decide again
        else:
            for cmd in plan.later:
                _settle(writer, cmd, writer.projector.state)
    return sorted(again, key=batch.index)


def stamp_inputs(accepted: dict[bytes, list[Cmd]], stage: str) -> None:
    """The input trace's `round` / `acked` stages of the inputs among these commands (aotx.runtime.input_trace)."""
    if TRACE.on:
        for cmds in accepted.values():
            for c in cmds:
                if isinstance(c.mutation, SubmitInput):
                    TRACE.stamp(c.lineage, c.mutation.envelope.sequence, stage)


def _settle(writer: JournalWriter, cmd: Cmd, state) -> None:
    try:
        outcome = settled(state, cmd)
    except PlanError as exc:
        writer.failed = str(exc)
        outcome = writer.failed_outcome()
    answer([cmd], outcome)


def _lease_admissions(writer: JournalWriter, accepted: dict[bytes, list[Cmd]],
                      leases: Optional[AdmissionLeases]) -> list[tuple[bytes, int]]:
    """Ask for the lease of each admitted input (set on its command); the (lineage, sequence) of those
    leased. None where the round publishes memory (recall bounds read the acknowledged store)."""
    if leases is None:
        return []
    cmds = [c for lineage_cmds in accepted.values() for c in lineage_cmds]
    if any(isinstance(e, MemoryPublicationRecorded) for c in cmds for e in c.decision.events):
        return []
    assert writer.projector is not None
    state, out = writer.projector.state, []
    for cmd in cmds:
        admitted = next((e for e in cmd.decision.events if isinstance(e, InputAdmitted)), None)
        if admitted is None or not isinstance(cmd.mutation, SubmitInput):
            continue
        cmd.lease = leases.lease_at_admission(state, cmd.lineage, cmd.mutation, admitted)
        if cmd.lease is not None:
            out.append((cmd.lineage, admitted.op.sequence))
    return out


async def _fly(writer: JournalWriter, accepted: dict[bytes, list[Cmd]], batch: list[Cmd]) -> list[Flight]:
    assert writer.projector is not None
    flights: list[tuple[Flight, list[Cmd]]] = []
    for lineage, cmds in accepted.items():
        groups, at_group = [], []
        for c in cmds:   # a command's events, then its input's lease (a group of its own) right behind them
            at_group.append(len(groups))
            groups.append(c.decision.events)
            if c.lease is not None:
                groups.append([c.lease])
        ticks, where = encode_ticks(writer.projector, writer.boot_id, lineage, groups)
        for cmd, g in zip(cmds, at_group):
            cmd.tick = where[g]   # answered once its own events landed
        flights.append((writer.flight(lineage, ticks), cmds))
    mutations = {(c.lineage, c.mutation.envelope.sequence): c.mutation for _, cmds in flights for c in cmds}
    written = await writer.write([f for f, _ in flights], mutations)
    stamp_inputs(accepted, "acked")
    if not written:
        answer(batch, writer.failed_outcome())
        return [f for f, _ in flights]
    state = writer.projector.state
    answers = []
    for f, cmds in flights:
        for cmd in cmds:
            if cmd.tick >= len(f.landed):
                answers.append((cmd, f.error or writer.failed_outcome()))
                continue
            try:
                answers.append((cmd, accepted_answer(state, cmd)))
            except PlanError as exc:
                writer.failed = str(exc)
                answer(batch, writer.failed_outcome())
                return [f for f, _ in flights]
    await writer.settle([f for f, _ in flights])
    for cmd, outcome in answers:
        answer([cmd], outcome)
    return [f for f, _ in flights]
