"""One round of commands: plan (pure), encode, append, apply what landed, answer.

The planner decides the batch (aotx.runtime.planner); each lineage's accepted commands become one
flight of ticks (aotx.runtime.ticks) that the writer appends and applies (aotx.runtime.writer). A
command is answered after the ack of the tick that completes it; a flight that failed or was held
answers its commands that did not land with that refusal, and nothing of them is applied. Answers
decided on a pending state are given once every flight landed, else decided again next round, with
the commands that waited for another lineage's pending change (handed back to the group commit).
"""

from __future__ import annotations

from typing import Optional

from ..state import ExecutionContext
from .group_commit import answer
from .planner import Cmd, PlanError, accepted_answer, plan_batch, publication_decider, settled
from .ticks import encode_ticks
from .writer import Flight, JournalWriter


async def command_round(writer: JournalWriter, batch: list[Cmd],
                        context: Optional[ExecutionContext] = None) -> list[Cmd]:
    """Run one batch; returns the commands to decide again in the next batch (in batch order)."""
    refused = await writer.unready()
    if refused is not None:
        answer(batch, refused)
        return []
    assert writer.projector is not None
    live = writer.projector.state
    plan = plan_batch(live, batch, context, publication_decider(writer.projector.memory))
    for cmd in plan.final:
        _settle(writer, cmd, live)
    if plan.failed:
        writer.failed = plan.failed
        answer(batch, writer.failed_outcome())
        return []
    failed = False
    if plan.flights:
        flights = await _fly(writer, plan.flights, batch)
        failed = any(f.error is not None for f in flights)
    again = plan.wait
    if plan.later:
        if writer.failed or failed:
            again = plan.later + again   # decided on a state that did not all land: decide again
        else:
            for cmd in plan.later:
                _settle(writer, cmd, writer.projector.state)
    return sorted(again, key=batch.index)


def _settle(writer: JournalWriter, cmd: Cmd, state) -> None:
    try:
        outcome = settled(state, cmd)
    except PlanError as exc:
        writer.failed = str(exc)
        outcome = writer.failed_outcome()
    answer([cmd], outcome)


async def _fly(writer: JournalWriter, accepted: dict[bytes, list[Cmd]], batch: list[Cmd]) -> list[Flight]:
    assert writer.projector is not None
    flights: list[tuple[Flight, list[Cmd]]] = []
    for lineage, cmds in accepted.items():
        ticks, where = encode_ticks(writer.projector, writer.boot_id, lineage, [c.decision.events for c in cmds])
        for cmd, at in zip(cmds, where):
            cmd.tick = at
        flights.append((writer.flight(lineage, ticks), cmds))
    mutations = {(c.lineage, c.mutation.envelope.sequence): c.mutation for _, cmds in flights for c in cmds}
    if not await writer.write([f for f, _ in flights], mutations):
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
