"""The split deployment's state-change announcement: what changed, on `aotx.rt.<name>.changed`.

One msgpack map per announcement (the runtime coalesces the changes of at most ANNOUNCE_INTERVAL):

    {"v": 1,
     "all": bool,                   every reader reads again (a boot, grants reloaded, changes lost)
     "ops": [bin24, ...],           operations: lineage (16 bytes) ‖ sequence (u64 big-endian)
     "cons": [bin32, ...],          conversations: lineage ‖ id
     "floors": [[bin16, int], ...]} retirements: lineage, retry floor (its operations below it)

No output bytes travel: a gateway's reader reads them (with its rights checked) from the runtime.
An empty message (a runtime of before this format) means "all". Anything else that does not parse
raises AnnouncementError (the gateway then resyncs every reader).
"""

from __future__ import annotations

from typing import Any

import msgpack

from .targets import Targets

ANNOUNCEMENT_VERSION = 1


class AnnouncementError(ValueError):
    """An announcement that is not one of this format."""


def pack_targets(targets: Targets) -> bytes:
    ops = targets.ops | targets.deltas.keys()
    # spaces travel named as what is in them (ChangeFeed.concrete); any left unnamed: every reader
    return msgpack.packb({"v": ANNOUNCEMENT_VERSION, "all": targets.everyone or bool(targets.spaces),
                          "ops": [lineage + seq.to_bytes(8, "big") for lineage, seq in sorted(ops)],
                          "cons": sorted(targets.conversations),
                          "floors": [[lineage, floor] for lineage, floor in sorted(targets.floors.items())]},
                         use_bin_type=True)


def _bins(value: Any, size: int, what: str) -> list[bytes]:
    if not isinstance(value, list) or not all(isinstance(v, bytes) and len(v) == size for v in value):
        raise AnnouncementError(f"{what} must be a list of {size}-byte strings")
    return value


def unpack_targets(data: bytes) -> Targets:
    if not data:
        return Targets(everyone=True)
    try:
        msg = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise AnnouncementError(f"not msgpack: {exc}") from exc
    if not isinstance(msg, dict) or msg.get("v") != ANNOUNCEMENT_VERSION or not isinstance(msg.get("all"), bool):
        raise AnnouncementError(f"not a version {ANNOUNCEMENT_VERSION} announcement map")
    floors = msg.get("floors")
    if not isinstance(floors, list) or not all(
            isinstance(f, list) and len(f) == 2 and isinstance(f[0], bytes) and len(f[0]) == 16
            and isinstance(f[1], int) and f[1] >= 0 for f in floors):
        raise AnnouncementError("floors must be a list of [16-byte lineage, floor]")
    return Targets(ops={(o[:16], int.from_bytes(o[16:], "big")) for o in _bins(msg.get("ops"), 24, "ops")},
                   conversations=set(_bins(msg.get("cons"), 32, "cons")),
                   floors={lineage: floor for lineage, floor in floors}, everyone=msg["all"])
