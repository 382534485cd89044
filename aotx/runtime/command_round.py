"""One round of commands: plan (pure), encode, append, apply what landed, answer.

The planner decides the batch (aotx.runtime.planner); each lineage's accepted commands become one
flight of ticks (aotx.runtime.ticks) that the writer appends and applies (aotx.runtime.writer). A
command is answered after the ack of the tick that completes it; a flight that failed or was held
answers its commands that did not land with that refusal, and nothing of them is applied. Answers
decided on a pending state are given once every flight landed, else decided again next round, with
the commands that waited for another lineage's pending change (handed back to the group commit).

A command's tick applied as soon as it is acknowledged and next in the stream answers it then
(aotx.runtime.early_apply), not once every ack of its round came.

An admitted input the execution queue would lease at once gets its lease right behind its
admission in its lineage's flight (aotx.runtime.admission_lease: one append for both); the command
is answered after the tick completing its admission, as any command.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Optional

from ..state import ExecutionContext, InputAdmitted, MemoryPublicationRecorded, SubmitInput
from .admission_lease import AdmissionLeases
from .catch_up import catch_up
from .group_commit import answer
from .input_trace import TRACE
from .planner import Ahead, Cmd, Plan, PlanError, accepted_answer, plan_batch, publication_decider, settled
from .round_stats import STATS, clock
from .ticks import encode_ticks
from .writer import Flight, JournalWriter


@dataclass(eq=False)
class Started:
    """A round whose plan is made and whose append is out (`append`: None where nothing is written)."""

    batch: list[Cmd]
    plan: Plan
    flights: list[tuple[Flight, list[Cmd]]] = field(default_factory=list)
    mutations: dict = field(default_factory=dict)
    append: Optional[asyncio.Task] = None
    leased: list = field(default_factory=list)
    leases: Optional[AdmissionLeases] = None
    sent: float = 0.0   # perf_counter when its append was sent (aotx.runtime.round_stats)


async def command_round(writer: JournalWriter, batch: list[Cmd], context: Optional[ExecutionContext] = None,
                        leases: Optional[AdmissionLeases] = None) -> list[Cmd]:
    """Run one batch; returns the commands to decide again in the next batch (in batch order)."""
    started = await begin_round(writer, batch, context, leases)
    if started is None:
        return []
    return sorted(started.plan.wait + await finish_round(writer, started), key=batch.index)


async def begin_round(writer: JournalWriter, batch: list[Cmd], context: Optional[ExecutionContext] = None,
                      leases: Optional[AdmissionLeases] = None, ahead: Optional[Ahead] = None) -> Optional[Started]:
    """Plan a batch, answer what is final now, and send its flights' append (a task). None when the
    whole batch is answered (refused, or the runtime stopped). `ahead`: rounds whose appends are in
    flight (aotx.runtime.pipeline; the writer is then in sync and off hold). In follow mode every round
    first applies the log up to its end (catch_up); a pipelined one may apply there messages of the
    rounds ahead whose acks have not come yet — the log's bytes, as a replay would (their rounds skip
    them then) — and where the writer fell out of sync meanwhile the whole batch waits for the rounds
    ahead to finish (`plan.wait`)."""
    t0 = clock() if STATS.on else 0.0
    if ahead is None:
        refused = await writer.unready()
        if refused is None and writer.catch_up:   # follow mode: decide on the log as it is now (docs/SCALE.md §3)
            refused = await catch_up(writer)
        if refused is not None:
            answer(batch, refused)
            return None
    elif writer.catch_up:   # pipelined in follow mode: the same catch-up, while the rounds ahead are in flight
        refused = await catch_up(writer)
        if refused is not None:
            answer(batch, refused)
            return None
        if writer.failed or writer.unsynced or writer.hold.active:   # (a round ahead failed meanwhile)
            return Started(batch, Plan(wait=list(batch)))   # decided once the rounds ahead are finished
    if STATS.on:
        t1 = clock()
        STATS.add("round_ready_s", t1 - t0)   # unready + the pre-round catch-up (follow mode)
        t0 = t1
    assert writer.projector is not None
    live = writer.projector.state
    plan = plan_batch(live, batch, context, publication_decider(writer.projector.memory), ahead)
    stamp_inputs(plan.flights, "round")
    for cmd in plan.final:
        _settle(writer, cmd, live)
    if plan.failed:
        writer.failed = plan.failed
        answer(batch, writer.failed_outcome())
        return None
    started = Started(batch, plan, leases=leases)
    if plan.flights:
        if ahead is None or not ahead.publishes:
            started.leased = _lease_admissions(writer, plan.flights, leases)
        try:
            _encode(writer, started)
            started.append = asyncio.get_running_loop().create_task(writer.append([f for f, _ in started.flights]))
        except BaseException:
            _leases_settled(started)
            raise
    if STATS.on:
        started.sent = clock()
        STATS.add("round_plan_s", started.sent - t0)   # plan, answers now final, encode
        STATS.add("rounds")
        STATS.add("round_pipelined", ahead is not None)
        STATS.add("round_flights", len(started.flights))
        STATS.add("round_msgs", sum(len(f.ticks) for f, _ in started.flights))
    return started


async def finish_round(writer: JournalWriter, started: Started) -> list[Cmd]:
    """Wait for a started round's append, apply what landed, answer; returns the commands decided on a
    state that did not all land, to decide again (the commands that wait are the caller's: `plan.wait`)."""
    plan, failed = started.plan, False
    if started.append is not None:
        try:
            t0 = clock() if STATS.on else 0.0
            await started.append
            if STATS.on:
                t1 = clock()
                STATS.add("round_append_s", t1 - started.sent)   # sent → its answers seen here (wall)
                STATS.add("round_append_wait_s", t1 - t0)        # of which the finish waited
                t0 = t1
            await _landed(writer, started)
            if STATS.on:
                STATS.add("round_landed_s", clock() - t0)   # apply what landed (and read-backs between), answer
        finally:
            _leases_settled(started)
        failed = any(f.error is not None for f, _ in started.flights)
    if plan.later:
        if writer.failed or failed:
            return list(plan.later)   # decided on a state that did not all land: decide again
        for cmd in plan.later:
            _settle(writer, cmd, writer.projector.state)
    return []


def _leases_settled(started: Started) -> None:
    if started.leased:
        started.leases.admissions_settled(started.leased)
        started.leased = []


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


def _encode(writer: JournalWriter, started: Started) -> None:
    """Each lineage's accepted commands as one flight of ticks (a command's tick: the one completing it)."""
    assert writer.projector is not None
    for lineage, cmds in started.plan.flights.items():
        groups, at_group = [], []
        for c in cmds:   # a command's events, then its input's lease (a group of its own) right behind them
            at_group.append(len(groups))
            groups.append(c.decision.events)
            if c.lease is not None:
                groups.append([c.lease])
        ticks, where = encode_ticks(writer.projector, writer.boot_id, lineage, groups)
        for cmd, g in zip(cmds, at_group):
            cmd.tick = where[g]   # answered once its own events landed
        f = writer.flight(lineage, ticks)
        f.base = writer.projector.last_subject_seq.get(f.subject, 0)   # what it was decided on, whatever is
        f.early = _early_answers(writer, cmds)                         # applied before it is sent
        started.flights.append((f, cmds))
    started.mutations = {(c.lineage, c.mutation.envelope.sequence): c.mutation
                         for _, cmds in started.flights for c in cmds}
    for f, _ in started.flights:
        f.mutations = started.mutations


def _early_answers(writer: JournalWriter, cmds: list[Cmd]):
    """Answer a flight's commands completed by a tick as soon as it is applied (aotx.runtime.early_apply)."""
    def applied(index: int) -> None:
        for cmd in cmds:
            if cmd.tick == index and not cmd.future.done():
                try:
                    cmd.future.set_result(accepted_answer(writer.projector.state, cmd))
                except PlanError as exc:   # the round's finish answers every command the failure
                    writer.failed = str(exc)
    return applied


async def _landed(writer: JournalWriter, started: Started) -> None:
    """Apply a round's acknowledged ticks and answer its accepted commands."""
    assert writer.projector is not None
    flights, batch = started.flights, started.batch
    written = await writer.apply_landed([f for f, _ in flights], started.mutations)
    stamp_inputs(started.plan.flights, "acked")
    if not written:
        answer(batch, writer.failed_outcome())
        return
    state = writer.projector.state
    answers = []
    for f, cmds in flights:
        for cmd in cmds:
            if cmd.future.done():   # answered when its tick was applied early (or its caller went away)
                continue
            if cmd.tick >= len(f.landed):
                answers.append((cmd, f.error or writer.failed_outcome()))
                continue
            try:
                answers.append((cmd, accepted_answer(state, cmd)))
            except PlanError as exc:
                writer.failed = str(exc)
                answer(batch, writer.failed_outcome())
                return
    await writer.settle([f for f, _ in flights])
    for cmd, outcome in answers:
        answer([cmd], outcome)
