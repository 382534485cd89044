"""aotx.snapshot: the projection stored with the log position it covers, so boot replays only the tail.

`format` (the versioned, checksummed header), `body` (the Projector as msgpack), `codec` (encode /
decode a whole snapshot), `store` (the snapshots of one journal in its JetStream object store),
`boot` (`load_newest`: the newest valid snapshot, with the refusal rules), `keeper` (what the
runtime calls: boot from one, write one every N messages in the background).
"""

from .body import SnapshotUnready
from .boot import check_fits, load_newest
from .codec import covered_seq, decode_header, decode_snapshot, encode_snapshot
from .format import KNOWN_VERSIONS, MAGIC, VERSION, SnapshotHeader, SnapshotRefused, pack_snapshot, unpack_snapshot
from .keeper import DEFAULT_EVERY, SnapshotKeeper, SnapshotPolicy, SnapshotStats
from .store import SnapshotStore, incarnation_tag, snapshot_name

__all__ = ["DEFAULT_EVERY", "KNOWN_VERSIONS", "MAGIC", "SnapshotHeader", "SnapshotKeeper", "SnapshotPolicy",
           "SnapshotRefused", "SnapshotStats", "SnapshotStore", "SnapshotUnready", "VERSION", "check_fits",
           "covered_seq", "decode_header", "decode_snapshot", "encode_snapshot", "incarnation_tag", "load_newest",
           "pack_snapshot", "snapshot_name", "unpack_snapshot"]
