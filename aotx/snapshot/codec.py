"""A whole snapshot: encode = a pure function of the Projector, decode = the Projector back.

`encode_snapshot(p)` frames `encode_body(p)` with the format-2 header (aotx.snapshot.format): the
projection's stream and incarnation, the last stream sequence it covers (the highest it applied:
the keeper takes a snapshot only where the projection holds every message up to it, in order), the
messages it applied and its capacities. `decode_snapshot(blob)` checks the header, then decodes the
body into a Projector equal to the one encoded (same state hash, positions and chains), which goes
on applying journal messages exactly as that one would.
"""

from __future__ import annotations

from ..projection import Projector
from .body import decode_body, encode_body
from .format import SnapshotHeader, SnapshotRefused, pack_snapshot, unpack_snapshot


def covered_seq(p: Projector) -> int:
    """The last stream sequence a projection has applied (0 before any)."""
    return p.applied_seq


def encode_snapshot(p: Projector) -> bytes:
    """The snapshot of `p`; SnapshotUnready where a transfer is open."""
    body = encode_body(p)
    header = SnapshotHeader(p.source, p.incarnation, covered_seq(p), p.messages, p.state.capacities, len(body))
    return pack_snapshot(header, body)


def decode_header(blob: bytes) -> SnapshotHeader:
    return unpack_snapshot(blob)[0]


def decode_snapshot(blob: bytes) -> tuple[SnapshotHeader, Projector]:
    """The header and the projection of a snapshot; SnapshotRefused for anything that is not a valid one."""
    header, body = unpack_snapshot(blob)
    return header, decode_projection(header, body)


def decode_projection(header: SnapshotHeader, body) -> Projector:
    p = decode_body(body, header.stream, header.incarnation, header.capacities, header.version)
    if (p.messages, covered_seq(p)) != (header.messages, header.covered):
        raise SnapshotRefused("body", f"the body applied {p.messages} messages up to sequence {covered_seq(p)}, "
                                      f"the header says {header.messages} up to {header.covered}")
    return p
