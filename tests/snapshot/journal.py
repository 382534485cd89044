"""Journal messages written with the runtime's own encoders, decided by the pure core, no NATS.

`LogBuilder` keeps a live Projector and appends what the runtime would: per lineage an Emitter (a
`runtime.boot` control record first), mutation events (`decide` → `encode_event`), and the execution
of an input (lease, retained memory, output, completion bodies), each tick fed to the live projector
at its stream sequence. `rich_log()` is a log with registrations, spaces of every scope, members,
conversations, inputs with memory, a publication, a cancellation, retirements and a transfer split
over two messages with another lineage's message between them (what a resumed hold leaves).
"""

from __future__ import annotations

import itertools

import numpy as np

from aotx.journal import Emitter, TransferKind, lineage_hash, pack_body
from aotx.memory import MemoryOp, compose_text, decide_publication, encode_memory_event, memory_event_body
from aotx.memory.store_parts import export_parts
from aotx.runtime.memory_work import input_place, retention
from aotx.runtime.replay import Projector, boot_control_body
from aotx.state import (SCHEMA, Accepted, MemoryKind, Actor, Capacities, Command, ExecutionContext, Grants, ModelCaps,
                        MutationKind, Refusal, decide, encode_event, lineage_for, parse_mutation, receipt_json,
                        transfer_kind)
from aotx.state.execution import (InputCompleted, LeaseApplied, OutputAppended, default_lease, execution_body)
from aotx.state.vocab import Execution

MODEL = "m"
CTX = ExecutionContext({MODEL: ModelCaps(bytes(range(32)))}, page_grant=64)
SOURCE, INCARNATION = "SNAPTEST", "2026-12-01T00:00:00+00:00"
BOOTS = ("a" * 32, "b" * 32)   # two runtime boots: the second writes after a restart


def unit(axis: int) -> np.ndarray:
    v = np.zeros(384, dtype=np.float32)
    v[axis % 384], v[(axis * 7 + 1) % 384] = 1.0, 0.5
    return (v / np.linalg.norm(v)).astype(np.float32)


class LogBuilder:
    def __init__(self, capacities: Capacities | None = None) -> None:
        self.live = Projector(SOURCE, INCARNATION, capacities)
        self.messages: list[tuple[str, int, bytes]] = []
        self.next_seq: dict[str, int] = {}
        self.keys = itertools.count(1)
        self.boot = BOOTS[0]

    # ---- writing ----
    @staticmethod
    def subject(lineage: bytes) -> str:
        return f"snap.j.{lineage.hex()}.tick"

    def ticks(self, lineage: bytes, items: list[tuple[int, bytes]]) -> list[tuple[str, bytes]]:
        """The ticks the runtime would append for these transfers (not yet in the log)."""
        lh = lineage_hash(lineage)
        em = Emitter(lh, next_transfer_id=self.live.last_transfer.get(lh, 0) + 1)
        if self.live.boots.get(lh) != self.boot:
            em.submit(TransferKind.CONTROL, boot_control_body(self.boot))
        for kind, payload in items:
            em.submit_payload(kind, payload)
        return [(self.subject(lineage), t.data) for t in em.drain()]

    def put(self, subject: str, data: bytes) -> int:
        seq = len(self.messages) + 1
        self.messages.append((subject, seq, data))
        self.live.feed(subject, seq, data)
        return seq

    def write(self, lineage: bytes, items: list[tuple[int, bytes]]) -> None:
        for subject, data in self.ticks(lineage, items):
            self.put(subject, data)

    # ---- mutations ----
    def _publisher(self, state, actor, header, m):
        d = decide_publication(self.live.memory, state, actor, MemoryOp(header.lineage, header.sequence,
                                                                          header.operation),
                               str(m.space), m.object, m.source_version)
        return d if isinstance(d, Refusal) else encode_memory_event(d)

    def decide(self, principal: str, kind: MutationKind, space: str | None = None, **fields) -> list[tuple[int, bytes]]:
        seq = self.next_seq.get(principal, 1)
        body = {"schema": SCHEMA, "lineage": lineage_for(principal).hex(), "operation_key": f"{next(self.keys):032x}",
                "sequence": str(seq), **fields}
        decision = decide(self.live.state, Command(Actor(principal, Grants.all()), parse_mutation(kind, body, space),
                                                   CTX, self._publisher))
        assert isinstance(decision, Accepted), decision
        self.next_seq[principal] = seq + 1
        return [(transfer_kind(e), encode_event(e)) for e in decision.events]

    def do(self, principal: str, kind: MutationKind, space: str | None = None, **fields) -> dict:
        """One accepted mutation, journalled; its receipt."""
        seq = self.next_seq.get(principal, 1)
        self.write(lineage_for(principal), self.decide(principal, kind, space, **fields))
        return receipt_json(self.live.state, self.live.state.receipt_slot(lineage_for(principal), seq))

    def execute(self, principal: str, sequence: int, text: str, *, output: bytes = b"answer",
                status: Execution = Execution.COMPLETED) -> None:
        """Lease, retained memory, output and completion of an admitted input, as the executor journals them."""
        lineage = lineage_for(principal)
        state = self.live.state
        slot = state.receipt_slot(lineage, sequence)
        self.write(lineage, [(TransferKind.LEASE, pack_body(execution_body(
            LeaseApplied(lineage, default_lease(lineage, sequence, slot % 8)))))])
        memory = retention(input_place(state, slot), lineage, 1, compose_text(text), unit(sequence), None)
        items = [(TransferKind.MEMORY, pack_body(memory_event_body(memory))),
                 (TransferKind.OUTPUT, pack_body(execution_body(OutputAppended(lineage, sequence, 0, output))))]
        items.append((TransferKind.COMPLETION, pack_body(execution_body(
            InputCompleted(lineage, sequence, status, input_tokens=7, output_tokens=3, finish="stop")))))
        self.write(lineage, items)


def rich_log(capacities: Capacities | None = None) -> LogBuilder:
    b = LogBuilder(capacities)
    alice, bob = lineage_for("alice"), lineage_for("bob")
    b.do("alice", MutationKind.REGISTER)
    b.do("bob", MutationKind.REGISTER)
    bob_id = receipt_json(b.live.state, b.live.state.receipt_slot(bob, 1))["resource"]
    spaces = {}
    for scope in ("private", "room", "instance"):
        spaces[scope] = b.do("alice", MutationKind.CREATE_SPACE, scope=scope)["resource"]
        b.do("alice", MutationKind.SET_MEMBER, spaces[scope], participant=bob_id, permissions=["read", "write"])
    con = b.do("alice", MutationKind.CREATE_CONVERSATION, spaces["room"])["resource"]
    first = b.do("alice", MutationKind.INPUT, con, text="deploy day is Thursday", model=MODEL)
    b.execute("alice", int(first["sequence"]), "deploy day is Thursday")
    second = b.do("alice", MutationKind.INPUT, con, text="and the freeze starts Monday", model=MODEL)
    seq = int(second["sequence"])
    b.write(alice, [(TransferKind.LEASE, pack_body(execution_body(LeaseApplied(alice, default_lease(alice, seq, 1)))))])
    # a long output spans several ticks, with bob's message landing between them (what a resumed hold leaves)
    long_output = OutputAppended(alice, seq, 0, b"y" * 5000)
    split = b.ticks(alice, [(TransferKind.OUTPUT, pack_body(execution_body(long_output)))])
    assert len(split) >= 2, "the long output spans several ticks"
    b.put(*split[0])
    bob_space = b.do("bob", MutationKind.CREATE_SPACE, scope="private")["resource"]
    for tick in split[1:]:
        b.put(*tick)
    b.write(alice, [(TransferKind.COMPLETION, pack_body(execution_body(InputCompleted(
        alice, seq, Execution.COMPLETED, input_tokens=9, output_tokens=900, finish="length"))))])
    text_row = next(row for row, _, _ in export_parts(b.live.memory)["objects"] if row.kind == MemoryKind.TEXT)
    b.boot = BOOTS[1]   # a restart: the next writes carry a new boot
    b.do("alice", MutationKind.PUBLISH, spaces["instance"], object=text_row.object.hex(), source_version="1")
    cancelled = b.do("alice", MutationKind.INPUT, con, text="never mind", model=MODEL)
    b.do("alice", MutationKind.CANCEL, con, target_sequence=cancelled["sequence"])
    b.write(alice, [(TransferKind.COMPLETION, pack_body(execution_body(InputCompleted(
        alice, int(cancelled["sequence"]), Execution.CANCELLED, finish="cancelled"))))])
    b.do("alice", MutationKind.RETIRE, retry_floor="4")
    b.do("bob", MutationKind.CREATE_CONVERSATION, bob_space)
    b.do("bob", MutationKind.RETIRE, retry_floor="3")
    return b
