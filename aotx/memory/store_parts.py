"""A MemoryStore as plain values and back, for aotx.snapshot (the store itself stays event-driven).

`export_parts(store)` lists everything the store holds; `import_parts(parts)` builds the store it
describes, which holds the same and goes on applying events exactly as the original would. Objects
come in creation order (their list cursor). These two read and write the store's private fields:
they live next to it and change with it (tests/snapshot pins the field list).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import MemoryApplyError
from .payload import EMBEDDING_DIM
from .store import MemoryStore

STORE_FIELDS = ("_objects", "_order", "_embedding_of", "_interpretation_of", "_matrix", "_matrix_ids", "_matrix_row",
                "_retained", "applied")


def export_parts(store: MemoryStore) -> dict[str, Any]:
    s = store
    n = len(s._matrix_ids)
    return {"objects": [(o.row, o.payload, o.source_version) for o in map(s._objects.__getitem__, s._order)],
            "embedding_of": sorted(s._embedding_of.items()),
            "interpretation_of": sorted(s._interpretation_of.items()),
            "matrix_ids": list(s._matrix_ids), "matrix": s._matrix[:n].copy(),
            "retained": sorted(s._retained), "applied": s.applied}


def import_parts(parts: dict[str, Any]) -> MemoryStore:
    """The store `export_parts` described; MemoryApplyError when the parts do not fit together."""
    store = MemoryStore()
    for row, payload, source_version in parts["objects"]:
        if row.object in store._objects:
            raise MemoryApplyError(f"snapshot: object {row.object.hex()} listed twice")
        store._add(row, payload, source_version)
    for name, target in (("embedding_of", store._embedding_of), ("interpretation_of", store._interpretation_of)):
        for text, derived in parts[name]:
            if text not in store._objects or derived not in store._objects:
                raise MemoryApplyError(f"snapshot: {name} names an object the store does not hold")
            target[text] = derived
    ids, matrix = list(parts["matrix_ids"]), np.asarray(parts["matrix"], dtype=np.float32)
    if matrix.shape != (len(ids), EMBEDDING_DIM) or len(set(ids)) != len(ids) or \
            any(i not in store._objects for i in ids):
        raise MemoryApplyError("snapshot: the recall matrix does not match its embedding objects")
    capacity = len(store._matrix)
    while capacity < len(ids):   # the capacity the doubling in MemoryStore._set_vector reaches
        capacity *= 2
    store._matrix = np.zeros((capacity, EMBEDDING_DIM), dtype=np.float32)
    store._matrix[:len(ids)] = matrix
    store._matrix_ids = ids
    store._matrix_row = {obj: row for row, obj in enumerate(ids)}
    store._retained = {(bytes(lineage), bytes(operation)) for lineage, operation in parts["retained"]}
    store.applied = int(parts["applied"])
    return store
