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

A pipelined round (aotx.runtime.pipeline) is planned while earlier rounds' appends are in flight
(`ahead`): as if it continued their batch. Their lineages' commands wait (a lineage's next tick
needs the stream sequence of its previous one as its guard, known only once acknowledged); what they
touch and the rows they take count as this batch's own; and a command is decided only while every
table keeps room after all of them (else it waits), so that no decision reads their pending events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..memory import MemoryOp, MemoryStore, decide_publication, encode_memory_event
from ..state import (Accepted, Command, Decision, ExecutionContext, MemoryPublicationRecorded, PublishMemory,
                     Refusal, State, StateError, decide, lineage_for, receipt_json)
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
    order: int = 0      # when it was queued (aotx.runtime.pipeline queues commands again in this order)
    lease: Any = None   # an admitted input's lease journalled right behind it (aotx.runtime.admission_lease)
    queued: float = 0.0   # perf_counter when it was queued, where aotx.runtime.round_stats is on


@dataclass
class Plan:
    flights: dict[bytes, list[Cmd]] = field(default_factory=dict)   # lineage -> accepted commands, in order
    final: list[Cmd] = field(default_factory=list)   # refused or retried on the acknowledged state: answer now
    later: list[Cmd] = field(default_factory=list)   # refused or retried on a pending state: final if all lands
    wait: list[Cmd] = field(default_factory=list)    # read another lineage's pending change: next batch
    failed: Optional[str] = None   # an accepted event did not apply to the pending state: never go on
    ahead: Optional["Ahead"] = None   # what this round holds in flight (its own part), for rounds behind it


@dataclass
class Ahead:
    """What rounds in flight hold, for a round planned behind them: the lineages whose commands must
    wait (accepted, or decided on a pending state), what they touch, the rows they take, and whether
    they publish memory (then no admission is leased at once: aotx.runtime.admission_lease)."""

    lineages: set[bytes] = field(default_factory=set)
    touched: Touched = field(default_factory=dict)
    consumed: dict[str, int] = field(default_factory=no_rows)
    publishes: bool = False

    later: set[bytes] = field(default_factory=set)   # of `lineages`: those with a command decided on a pending state

    @staticmethod
    def of(rounds: list["Ahead"], applied: frozenset[bytes] = frozenset()) -> "Ahead":
        """What several rounds in flight hold together. `applied`: lineages whose flight landed and is
        applied (the acknowledged state holds its events): they hold nothing, unless decided on a pending state."""
        out = Ahead()
        for a in rounds:
            out.lineages |= {lineage for lineage in a.lineages if lineage not in applied or lineage in a.later}
            out.touched.update({k: lineage for k, lineage in a.touched.items() if lineage not in applied})
            for k, v in a.consumed.items():
                out.consumed[k] += v
            out.publishes = out.publishes or a.publishes
        return out


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
               publisher: Optional[Callable[..., Any]] = None, ahead: Optional[Ahead] = None) -> Plan:
    """Decide `batch` in order against `live` (the acknowledged state) and the pending state; sets
    each decided command's `lineage` and `decision`. `ahead`: the rounds in flight it is planned
    behind (pipelined: aotx.runtime.pipeline); `plan.ahead`: what this round adds to them."""
    plan = Plan()
    pending: State | None = None
    unapplied: list = []
    behind = ahead is not None
    ahead = ahead or Ahead()
    touched: Touched = dict(ahead.touched)
    deferred: set[bytes] = set(ahead.lineages)
    consumed = dict(ahead.consumed)   # rows the accepted commands (theirs and the batch's) may take
    own = plan.ahead = Ahead()   # this round's own part, for the rounds planned behind it

    def accept(cmd: Cmd, decision: Accepted) -> None:
        plan.flights.setdefault(cmd.lineage, []).append(cmd)
        unapplied.extend(decision.events)
        for into in (touched, own.touched):
            touch(into, cmd.lineage, decision.events)
        for rows in (consumed, own.consumed):
            consume(rows, decision.events)
        own.publishes = own.publishes or any(isinstance(e, MemoryPublicationRecorded) for e in decision.events)

    for cmd in batch:
        cmd.lineage = lineage_for(cmd.actor.principal)
        room = headroom(live, consumed)
        if cmd.lineage in deferred or depends(cmd.lineage, cmd.mutation, touched, room) or (behind and not room):
            deferred.add(cmd.lineage)  # keep a lineage's commands in their order
            plan.wait.append(cmd)
            continue
        if cmd.lineage not in plan.flights and room:
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
    own.later = {c.lineage for c in plan.later}
    own.lineages = set(plan.flights) | own.later
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
