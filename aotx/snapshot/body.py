"""The body of a snapshot: the Projector as one msgpack map (aotx.snapshot.format frames it).

    {"state": {"tables": [[name, dtype descr, rows, raw bytes] × 5 in TABLES order],
               "counts": [participants, spaces, conversations, members], "applied": n,
               "commands": [[slot, bytes]…], "saves": [[slot, [source, incarnation, generation, boot,
               commit digest, pending bytes, disk error]]…], "executions": [[slot, [ExecutionRecord fields
               in EXECUTION_FIELDS order]]…], "input_counts": [[row, count]…]},
     "memory": {"objects": [[128-byte row, payload, source version]…] in creation order,
                "embedding_of": [[text, embedding]…], "interpretation_of": [[text, interpretation]…],
                "matrix_ids": [object…], "matrix": float32 little-endian rows, "retained": [[lineage,
                operation]…], "applied": n},
     "projector": {"last_transfer": [[lineage hash, id]…], "last_subject_seq": [[subject, seq]…],
                   "chains": [[lineage hash, digest]…], "boots": [[lineage hash, boot]…], "messages": n,
                   "transfers": n},
     "reassembler": {"last_id": [[lineage hash, id]…]},
     "stored": the stored state (aotx.stored.export: books of responses, conversations, keys) — format 2}

Format 1 has no "stored" key and decodes as a projection with an empty stored state; format 2 must
have it.

Per-slot lists are sparse (only slots that differ from an empty state's b"", None, None, 0) and
every list of pairs is sorted, so encoding is a pure function of the projection and
decode∘encode is the identity. A snapshot is taken only where no transfer is open (a partial
transfer's parts are not part of formats 1 and 2): `encode_body` refuses otherwise. Decoding checks every
key, type, length and index and raises SnapshotRefused("body", …) for anything else.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from ..journal import Reassembler
from ..memory.store_parts import export_parts, import_parts
from ..state import Capacities, Save, StateError, decode_memory_row, encode_memory_row
from ..state.execution import ExecutionRecord
from ..state.state import State
from ..state.tables import DTYPES, TABLES
from ..state.vocab import Execution
from ..memory.errors import MemoryApplyError
from ..projection import Projector
from ..stored import StoredState, export_stored, import_stored
from .format import VERSION, SnapshotRefused

EXECUTION_FIELDS = ("model_digest", "page_limit", "status", "lease_slot", "lease_revision", "retention_mode",
                    "output", "input_tokens", "output_tokens", "finish", "error", "cancel_requested", "order")
SAVE_FIELDS = ("source", "incarnation", "generation", "boot", "commit_digest", "pending_bytes", "disk_error")
_KEYS = {"state": {"tables", "counts", "applied", "commands", "saves", "executions", "input_counts"},
         "memory": {"objects", "embedding_of", "interpretation_of", "matrix_ids", "matrix", "retained", "applied"},
         "projector": {"last_transfer", "last_subject_seq", "chains", "boots", "messages", "transfers"},
         "reassembler": {"last_id"}}


class SnapshotUnready(Exception):
    """The projection is not at a point a snapshot can describe (a transfer is open)."""


def _descr(dtype: np.dtype) -> str:
    return str(np.lib.format.dtype_to_descr(dtype))


def _sparse(values, default) -> list:
    return [[i, v] for i, v in enumerate(values) if v != default]


def encode_body(p: Projector) -> bytes:
    if p.reassembler.open_transfers:
        raise SnapshotUnready(f"{len(p.reassembler.open_transfers)} transfer(s) open: no snapshot here")
    s = p.state
    mem = export_parts(p.memory)
    doc = {
        "state": {
            "tables": [[name, _descr(getattr(s, name).dtype), len(getattr(s, name)), getattr(s, name).tobytes()]
                       for name in TABLES],
            "counts": [s.n_participants, s.n_spaces, s.n_conversations, s.n_members], "applied": s.applied,
            "commands": _sparse(s.commands, b""),
            "saves": [[i, [getattr(v, f) for f in SAVE_FIELDS]] for i, v in enumerate(s.saves) if v is not None],
            "executions": [[i, [int(v.status) if f == "status" else getattr(v, f) for f in EXECUTION_FIELDS]]
                           for i, v in enumerate(s.executions) if v is not None],
            "input_counts": _sparse(s.input_counts, 0)},
        "memory": {
            "objects": [[encode_memory_row(row), payload, version] for row, payload, version in mem["objects"]],
            "embedding_of": [list(pair) for pair in mem["embedding_of"]],
            "interpretation_of": [list(pair) for pair in mem["interpretation_of"]],
            "matrix_ids": mem["matrix_ids"], "matrix": mem["matrix"].astype("<f4").tobytes(),
            "retained": [list(pair) for pair in mem["retained"]], "applied": mem["applied"]},
        "projector": {
            "last_transfer": sorted([k, v] for k, v in p.last_transfer.items()),
            "last_subject_seq": sorted([k, v] for k, v in p.last_subject_seq.items()),
            "chains": sorted([k, v] for k, v in p.chains.items()),
            "boots": sorted([k, v] for k, v in p.boots.items()),
            "messages": p.messages, "transfers": p.transfers},
        "reassembler": {"last_id": sorted([k, v] for k, v in p.reassembler.last_ids.items())},
        "stored": export_stored(p.stored),
    }
    return msgpack.packb(doc, use_bin_type=True)


def _bad(message: str) -> SnapshotRefused:
    return SnapshotRefused("body", message)


def _keys(doc: Any, want: set[str], where: str) -> dict:
    if not isinstance(doc, dict) or set(doc) != want:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise _bad(f"{where} has keys {got}, not {sorted(want)}")
    return doc


def _pairs(items: Any, where: str, key: type, value: type | tuple) -> list[tuple]:
    if not isinstance(items, list) or not all(isinstance(x, list) and len(x) == 2 and type(x[0]) is key
                                              and isinstance(x[1], value) for x in items):
        raise _bad(f"{where} is not a list of [{key.__name__}, value] pairs")
    return [tuple(x) for x in items]


def _slots(items: Any, n: int, default: Any, where: str, make=lambda v: v) -> list:
    out = [default] * n
    last = -1
    for pair in _pairs(items, where, int, object):
        i, value = pair
        if not last < i < n:
            raise _bad(f"{where}: slot {i} is out of order or outside 0..{n - 1}")
        out[i], last = make(value), i
    return out


def _table(entry: Any, name: str, capacity: int) -> np.ndarray:
    """A table of at least `capacity` rows (more where the log filled it past it: aotx.state.growth)."""
    dtype = DTYPES[name]
    if not (isinstance(entry, list) and len(entry) == 4 and entry[0] == name and isinstance(entry[3], bytes)):
        raise _bad(f"table {name}: not [name, descr, rows, bytes]")
    if entry[1] != _descr(dtype):
        raise _bad(f"table {name}: row layout {entry[1]} is not this runtime's")
    rows = entry[2]
    if type(rows) is not int or rows < capacity or len(entry[3]) != rows * dtype.itemsize:
        raise _bad(f"table {name}: {rows!r:.20} rows / {len(entry[3])} bytes, capacity {capacity}")
    return np.frombuffer(entry[3], dtype=dtype).copy()


def _execution(values: Any) -> ExecutionRecord:
    if not isinstance(values, list) or len(values) != len(EXECUTION_FIELDS):
        raise _bad("an execution record is not a list of its fields")
    record = dict(zip(EXECUTION_FIELDS, values))
    record["status"] = Execution(record["status"])
    return ExecutionRecord(**record)


def _save(values: Any) -> Save:
    if not isinstance(values, list) or len(values) != len(SAVE_FIELDS):
        raise _bad("a save is not a list of its fields")
    return Save(**dict(zip(SAVE_FIELDS, values)))


def decode_body(body: bytes | memoryview, source: str, incarnation: str, capacities: Capacities,
                version: int = VERSION) -> Projector:
    try:
        doc = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:  # msgpack raises these for a bad body
        raise _bad(f"not one msgpack value: {type(exc).__name__}: {exc}") from None
    try:
        keys = set(_KEYS) | ({"stored"} if version >= 2 else set())
        p = _projector(_keys(doc, keys, "the body"), source, incarnation, capacities)
        p.stored = import_stored(doc["stored"]) if version >= 2 else StoredState()
        return p
    except (StateError, MemoryApplyError, ValueError, TypeError, KeyError) as exc:
        raise _bad(f"{type(exc).__name__}: {exc}") from None


def _projector(doc: dict, source: str, incarnation: str, caps: Capacities) -> Projector:
    st = _keys(doc["state"], _KEYS["state"], "state")
    tables = st["tables"]
    if not isinstance(tables, list) or len(tables) != len(TABLES):
        raise _bad(f"state holds {len(tables) if isinstance(tables, list) else 'no'} tables, not {len(TABLES)}")
    arrays = {name: _table(entry, name, getattr(caps, name)) for name, entry in zip(TABLES, tables)}
    counts = st["counts"]
    if not (isinstance(counts, list) and len(counts) == 4 and all(type(c) is int for c in counts)
            and all(0 <= c <= len(arrays[t]) for c, t in zip(counts, TABLES))) or type(st["applied"]) is not int:
        raise _bad(f"row counts {counts!r:.80} do not fit the tables")
    slots, conversations = len(arrays["receipts"]), len(arrays["conversations"])
    state = State(caps, **arrays, n_participants=counts[0], n_spaces=counts[1], n_conversations=counts[2],
                  n_members=counts[3], applied=st["applied"],
                  commands=_slots(st["commands"], slots, b"", "commands"),
                  saves=_slots(st["saves"], slots, None, "saves", _save),
                  executions=_slots(st["executions"], slots, None, "executions", _execution),
                  input_counts=_slots(st["input_counts"], conversations, 0, "input counts"))
    if not all(isinstance(c, bytes) for c in state.commands) or not all(type(c) is int for c in state.input_counts):
        raise _bad("commands are bytes and input counts integers")

    m = _keys(doc["memory"], _KEYS["memory"], "memory")
    objects = m["objects"]
    if not isinstance(objects, list) or not all(isinstance(o, list) and len(o) == 3 and isinstance(o[0], bytes)
                                                and isinstance(o[1], bytes) and type(o[2]) is int for o in objects):
        raise _bad("memory objects are not [row, payload, source version] triples")
    if not isinstance(m["matrix"], bytes) or len(m["matrix"]) % 4 or not isinstance(m["matrix_ids"], list) \
            or not all(isinstance(i, bytes) for i in m["matrix_ids"]):
        raise _bad("the recall matrix is not float32 rows with their embedding objects")
    memory = import_parts({
        "objects": [(decode_memory_row(row), payload, version) for row, payload, version in objects],
        "embedding_of": _pairs(m["embedding_of"], "embedding_of", bytes, bytes),
        "interpretation_of": _pairs(m["interpretation_of"], "interpretation_of", bytes, bytes),
        "matrix_ids": m["matrix_ids"],
        "matrix": np.frombuffer(m["matrix"], dtype="<f4").reshape(len(m["matrix_ids"]), -1)
        if m["matrix_ids"] else np.zeros((0, 384), dtype=np.float32),
        "retained": _pairs(m["retained"], "retained", bytes, bytes), "applied": m["applied"]})

    pj = _keys(doc["projector"], _KEYS["projector"], "projector")
    rs = _keys(doc["reassembler"], _KEYS["reassembler"], "reassembler")
    if type(pj["messages"]) is not int or type(pj["transfers"]) is not int:
        raise _bad("message and transfer counts are integers")
    p = Projector(source=source, incarnation=incarnation, capacities=caps)
    for name in TABLES:   # read-only between applies, as the projector keeps its own
        getattr(state, name).flags.writeable = False
    p.state = state
    p.memory = memory
    p.reassembler = Reassembler.resume(dict(_pairs(rs["last_id"], "reassembler last ids", int, int)), recovery=True)
    p.last_transfer = dict(_pairs(pj["last_transfer"], "last transfer ids", int, int))
    p.last_subject_seq = dict(_pairs(pj["last_subject_seq"], "last subject sequences", str, int))
    p.applied_seq = max(p.last_subject_seq.values(), default=0)   # not stored: derived, as before
    p.chains = dict(_pairs(pj["chains"], "commit chains", int, bytes))
    p.boots = dict(_pairs(pj["boots"], "boots", int, str))
    p.messages, p.transfers = pj["messages"], pj["transfers"]
    return p

