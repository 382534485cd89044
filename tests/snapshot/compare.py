"""Everything a Projector holds, as comparable values: two projections are the same iff these are equal."""

from __future__ import annotations

from aotx.memory.store_parts import export_parts
from aotx.runtime.replay import Projector
from aotx.state import state_hash
from aotx.state.tables import TABLES
from aotx.stored import export_stored, stored_digest


def fingerprint(p: Projector) -> dict:
    s, ix = p.state, p.state.index
    mem = export_parts(p.memory)
    return {
        "state_hash": state_hash(s), "memory_digest": p.memory.digest(), "capacities": s.capacities,
        "tables": {t: getattr(s, t).tobytes() for t in TABLES},
        "counts": (s.n_participants, s.n_spaces, s.n_conversations, s.n_members, s.applied),
        "commands": list(s.commands), "saves": list(s.saves), "executions": list(s.executions),
        "input_counts": list(s.input_counts),
        "index": (ix.participants, ix.spaces, ix.conversations, ix.members, ix.receipts, ix.keys,
                  ix.by_lineage, sorted(ix.free)),
        "memory": {**mem, "matrix": mem["matrix"].tobytes(), "matrix_capacity": p.memory._matrix.shape},
        "positions": (p.source, p.incarnation, p.last_transfer, p.last_subject_seq, p.applied_seq, p.chains,
                      p.boots, p.messages, p.transfers),
        "stored": (stored_digest(p.stored), export_stored(p.stored), p.stored.totals),
        "reassembler": (p.reassembler.recovery, p.reassembler.last_ids, p.reassembler.open_transfers,
                        p.reassembler.faults),
    }


def replay(messages, capacities=None, source: str = "SNAPTEST", incarnation: str = "2026-12-01T00:00:00+00:00",
           into: Projector | None = None) -> Projector:
    p = into or Projector(source, incarnation, capacities)
    p.feed_many(messages)
    return p
