"""state_hash(state): a BLAKE2b-256 digest of every table, so replay ≡ live can be checked.

Covers capacities, row counts, every table's full bytes (free rows are zero) and the
canonical bytes of each receipt slot. Save fields and the applied-event counter are not
covered: they describe where the log put the events, not what the events decided.
"""

from __future__ import annotations

import hashlib
import struct

from .state import State
from .tables import TABLES

_PERSON = b"aotx-state-v1"


def state_hash(state: State) -> str:
    h = hashlib.blake2b(digest_size=32, person=_PERSON)
    caps = state.capacities.as_tuple()
    h.update(struct.pack(f"<{len(caps)}I", *caps))
    h.update(struct.pack("<4I", state.n_participants, state.n_spaces, state.n_conversations, state.n_members))
    for name in TABLES:
        arr = getattr(state, name)
        h.update(name.encode())
        h.update(struct.pack("<I", arr.nbytes))
        h.update(arr.tobytes())
    for command in state.commands:
        h.update(struct.pack("<I", len(command)))
        h.update(command)
    for slot, record in enumerate(state.executions):  # inputs only: states without any hash as before
        if record is not None:
            body = record.digest_bytes()
            h.update(struct.pack("<II", slot, len(body)))
            h.update(body)
    for row, count in enumerate(state.input_counts):
        if count:
            h.update(struct.pack("<IQ", row, count))
    return h.hexdigest()
