"""SnapshotStore: the snapshots of one journal in its JetStream object store (eventlog.SnapshotBucket).

Names: `<covered sequence, 20 digits>-<tag>`, tag = 16 hex digits of BLAKE2b over the stream's name
and incarnation, so a listing sorts newest first by name and tells a foreign snapshot (another
incarnation of the stream: it was deleted and created again) before downloading it. The name is
only a hint: the checked header decides. `save` writes a new snapshot, then keeps the newest
`keep` of this incarnation and removes every other one (older ones, foreign ones, names that are
not snapshots), then purges chunks a cut-short write left.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from eventlog import NatsAuth, SnapshotBucket

_NAME = re.compile(r"^(\d{20})-([0-9a-f]{16})$")


def incarnation_tag(stream: str, incarnation: str) -> str:
    return hashlib.blake2b(f"{stream}\x00{incarnation}".encode("utf-8"), digest_size=8,
                           person=b"aotx-snap-tag").hexdigest()


def snapshot_name(stream: str, incarnation: str, covered: int) -> str:
    return f"{covered:020d}-{incarnation_tag(stream, incarnation)}"


@dataclass(frozen=True)
class Listed:
    name: str
    covered: int     # what the name claims (-1: not a snapshot name)
    tag: str


class SnapshotStore:
    def __init__(self, bucket: SnapshotBucket) -> None:
        self.bucket = bucket

    @classmethod
    async def connect(cls, url: str, stream: str, *, auth: NatsAuth | None = None, timeout: float = 10.0,
                      replicas: int | None = None) -> "SnapshotStore":
        return cls(await SnapshotBucket.connect(url, stream, auth=auth, timeout=timeout, replicas=replicas))

    async def listing(self) -> list[Listed]:
        """Every name in the bucket, snapshots newest first, then names that are not snapshots'."""
        out = []
        for name in await self.bucket.names():
            m = _NAME.match(name)
            out.append(Listed(name, int(m.group(1)), m.group(2)) if m else Listed(name, -1, ""))
        return sorted(out, key=lambda e: (-e.covered, e.name))

    async def get(self, name: str) -> bytes:
        return await self.bucket.get(name)

    async def save(self, blob: bytes, stream: str, incarnation: str, covered: int,
                   keep: int = 2) -> tuple[str, list[str]]:
        """Write the snapshot, then prune; (its name, the names removed)."""
        name = snapshot_name(stream, incarnation, covered)
        await self.bucket.put(name, blob)
        tag = incarnation_tag(stream, incarnation)
        ours = 0
        removed = []
        for entry in await self.listing():
            if entry.tag == tag and ours < keep:
                ours += 1
                continue
            await self.bucket.remove(entry.name)
            removed.append(entry.name)
        await self.bucket.collect()
        return name, removed

    async def close(self) -> None:
        await self.bucket.close()
