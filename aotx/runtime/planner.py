"""The batch planner: what one round of queued commands does (pure: no journal, no asyncio).

The commands of a round are decided in order (pure `decide`). A command is decided on the
acknowledged state when nothing it reads can differ between that and the pending state (its
lineage has nothing pending in the batch, what it reads of other lineages is not touched by them,
and every table keeps room after the pending commands: aotx.runtime.dependencies); its refusal or
exact retry is then final whatever happens to the rest of the batch. Otherwise it is decided on the
pending state (the acknowledged state plus the batch's accepted events so far), and a refusal or
retry decided there is final only when every flight of the batch lands. A command whose decision
would read what another lineage's pending command changed waits for the next batch, and so do the
later commands of its lineage (a lineage's commands keep their order).

The plan: the accepted commands per lineage (each lineage's flight, in order), the answers final
now, those final only if the batch lands, and those that wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..memory import MemoryOp, MemoryStore, decide_publication, encode_memory_event
from ..state import (Accepted, Command, Decision, ExecutionContext, PublishMemory, Refusal, State, StateError, decide,
                     lineage_for, receipt_json)
from ..state.apply import apply_into, owned_copy
from ..state.mutations import Mutation
from ..state.rights import Actor
from .dependencies import Touched, consume, depends, headroom, no_rows, touch
from .outcome import Outcome


@dataclass(eq=False)
class Cmd:
    """A queued command and its decision. `future` is what the caller waits on (the planner never
    touches it); `tick`: which of its lineage's ticks completes its last transfer (set by the round)."""

    actor: Actor
    mutation: Mutation
    future: Any = None
    lineage: bytes = b""
    decision: Optional[Decision] = None
    tick: int = -1
    lease: Any = None   # an admitted input's lease journalled right behind it (aotx.runtime.admission_lease)


@dataclass
class Plan:
    flights: dict[bytes, list[Cmd]] = field(default_factory=dict)   # lineage -> accepted commands, in order
    final: list[Cmd] = field(default_factory=list)   # refused or retried on the acknowledged state: answer now
    later: list[Cmd] = field(default_factory=list)   # refused or retried on a pending state: final if all lands
    wait: list[Cmd] = field(default_factory=list)    # read another lineage's pending change: next batch
    failed: Optional[str] = None   # an accepted event did not apply to the pending state: never go on


class PlanError(RuntimeError):
    """A decision the state contradicts (the runtime must stop rather than guess)."""


def publication_decider(memory: MemoryStore) -> Callable[..., Any]:
    """A publication's memory part, decided against the acknowledged memory store (publications and
    retentions change it only under the writer's lock, after their ack)."""
    def publish(state: State, actor: Actor, header, m: PublishMemory):
        decision = decide_publication(memory, state, actor, MemoryOp(header.lineage, header.sequence,
                                                                      header.operation),
                                      str(m.space), m.object, m.source_version)
        return decision if isinstance(decision, Refusal) else encode_memory_event(decision)
    return publish


def plan_batch(live: State, batch: list[Cmd], context: Optional[ExecutionContext] = None,
               publisher: Optional[Callable[..., Any]] = None) -> Plan:
    """Decide `batch` in order against `live` (the acknowledged state) and the pending state; sets
    each decided command's `lineage` and `decision`."""
    plan = Plan()
    pending: State | None = None
    unapplied: list = []
    touched: Touched = {}
    deferred: set[bytes] = set()
    consumed = no_rows()   # rows the batch's accepted commands may take

    def accept(cmd: Cmd, decision: Accepted) -> None:
        plan.flights.setdefault(cmd.lineage, []).append(cmd)
        unapplied.extend(decision.events)
        touch(touched, cmd.lineage, decision.events)
        consume(consumed, decision.events)

    for cmd in batch:
        cmd.lineage = lineage_for(cmd.actor.principal)
        if cmd.lineage in deferred or depends(cmd.lineage, cmd.mutation, touched):
            deferred.add(cmd.lineage)  # keep a lineage's commands in their order
            plan.wait.append(cmd)
            continue
        if cmd.lineage not in plan.flights and headroom(live, consumed):
            # nothing this decision reads differs between the acknowledged and the pending state: decide
            # on the acknowledged state, and a refusal or retry is final whatever happens to the batch
            decision = cmd.decision = decide(live, Command(cmd.actor, cmd.mutation, context, publisher))
            if isinstance(decision, Accepted):
                accept(cmd, decision)
            else:
                plan.final.append(cmd)
            continue
        if unapplied:
            if pending is None:
                pending = owned_copy(live)
            try:
                for event in unapplied:
                    apply_into(pending, event)
            except StateError as exc:  # decide accepted what apply refuses: never continue on a guess
                plan.failed = f"an accepted event does not apply to the pending state: {exc}"
                return plan
            unapplied.clear()
        decision = cmd.decision = decide(live if pending is None else pending,
                                         Command(cmd.actor, cmd.mutation, context, publisher))
        if isinstance(decision, Accepted):
            accept(cmd, decision)
        elif pending is not None:
            plan.later.append(cmd)
        else:
            plan.final.append(cmd)
    return plan


def settled(state: State, cmd: Cmd) -> Outcome:
    """The answer to a command decided as a refusal or an exact retry (PlanError: a retry whose
    receipt `state` lacks)."""
    d = cmd.decision
    if isinstance(d, Refusal):
        return Outcome.refusal(d)
    slot = state.receipt_slot(cmd.lineage, cmd.mutation.envelope.sequence)
    if slot is None:
        raise PlanError(f"retry of operation {d.operation} has no receipt")
    return Outcome(200, receipt_json(state, slot))


def accepted_answer(state: State, cmd: Cmd) -> Outcome:
    """The answer to an accepted command once its ticks landed and were applied (PlanError: an
    acknowledged operation without a receipt)."""
    op = cmd.decision.events[-1].op
    slot = state.receipt_slot(op.lineage, op.sequence)
    if slot is None:  # an acknowledged tick that did not apply: never continue on a guess
        raise PlanError(f"acknowledged operation {cmd.decision.operation} has no receipt after apply")
    return Outcome(cmd.decision.status, receipt_json(state, slot))
