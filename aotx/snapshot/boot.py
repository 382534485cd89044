"""Boot from a snapshot: the newest valid one of this journal, else None (then boot replays it all).

`load_newest(store, info, capacities)` walks the bucket newest first and answers the first snapshot
that passes every rule, as (its Projector, the stream sequence to read the tail from). A snapshot is
refused — one warning line naming the reason, then the next older one is tried — when:

* foreign: it belongs to another stream, or to another incarnation of this one (the stream was
  deleted and created again: its created time differs);
* beyond: it covers a sequence past the stream's last one;
* gap: the stream no longer holds the messages right after it (first sequence past covered + 1);
* unreadable: its object is missing, cut short, or does not match its meta's size and SHA-256;
* format / version / checksum / body: not a snapshot, an unknown format version, a digest that
  does not match, a body that does not decode;
* capacities: its tables' capacities are not the runtime file's.

The cheap rules run on the name first (no download), then again on the checked header.
"""

from __future__ import annotations

import logging

from eventlog import BlobUnreadable, StreamStatus

from ..projection import Projector
from ..state import Capacities
from .codec import decode_projection
from .format import SnapshotHeader, SnapshotRefused, unpack_snapshot
from .store import Listed, SnapshotStore, incarnation_tag

log = logging.getLogger("aotx.snapshot")


def _by_name(entry: Listed, tag: str, info: StreamStatus) -> None:
    if entry.covered < 0:
        raise SnapshotRefused("format", "its name is not a snapshot's")
    if entry.tag != tag:
        raise SnapshotRefused("foreign", f"it belongs to another stream or incarnation (tag {entry.tag}, this "
                                         f"stream {info.name} created {info.created.isoformat()} has {tag})")
    if entry.covered > info.last_seq:
        raise SnapshotRefused("beyond", f"it covers sequence {entry.covered}, the stream ends at {info.last_seq}")


def check_fits(header: SnapshotHeader, entry_covered: int, info: StreamStatus, capacities: Capacities) -> None:
    """Refuse a snapshot whose checked header does not fit this stream and runtime."""
    incarnation = info.created.isoformat()
    if (header.stream, header.incarnation) != (info.name, incarnation):
        raise SnapshotRefused("foreign", f"it is of stream {header.stream} created {header.incarnation}, not "
                                         f"{info.name} created {incarnation}")
    if header.covered != entry_covered:
        raise SnapshotRefused("format", f"its name says sequence {entry_covered}, its header {header.covered}")
    if header.covered > info.last_seq:
        raise SnapshotRefused("beyond", f"it covers sequence {header.covered}, the stream ends at {info.last_seq}")
    if info.first_seq > header.covered + 1:
        raise SnapshotRefused("gap", f"the stream begins at sequence {info.first_seq}: the messages after "
                                     f"{header.covered} are gone")
    if header.capacities != capacities:
        raise SnapshotRefused("capacities", f"its capacities {header.capacities.as_tuple()} are not the runtime "
                                            f"file's {capacities.as_tuple()}")


def _decoded(header: SnapshotHeader, body) -> Projector:
    """The body's projection; a decoder fault on bytes that passed the checksum refuses this snapshot
    (reason body) instead of stopping the boot: the journal can still be replayed."""
    try:
        return decode_projection(header, body)
    except SnapshotRefused:
        raise
    except Exception as exc:  # noqa: BLE001 — any fault decoding stored bytes refuses them, logged by the caller
        raise SnapshotRefused("body", f"decoding failed: {type(exc).__name__}: {exc}") from exc


async def load_newest(store: SnapshotStore, info: StreamStatus,
                      capacities: Capacities) -> tuple[Projector, int] | None:
    tag = incarnation_tag(info.name, info.created.isoformat())
    for entry in await store.listing():
        try:
            _by_name(entry, tag, info)
            try:
                blob = await store.get(entry.name)
            except BlobUnreadable as exc:
                raise SnapshotRefused("unreadable", exc.reason) from None
            header, body = unpack_snapshot(blob)
            check_fits(header, entry.covered, info, capacities)
            projector = _decoded(header, body)
        except SnapshotRefused as exc:
            log.warning("snapshot %s refused (%s): %s; trying the next older one, else a full replay",
                        entry.name, exc.reason, exc.message)
            continue
        return projector, header.covered + 1
    return None
