"""Ownership leases in a JetStream KV bucket with a TTL (docs/SCALE.md §2).

`LeaseBucket.connect(nc, name, ttl)` opens (or creates) the bucket: history 1, file storage, max age
= `ttl` seconds, replicas as the server allows (replicas_for). A lease is one key:

* `acquire(key, value)` creates the key only when it holds nothing live: its revision, or None when
  another holder's lease is live (its last write is younger than the TTL);
* `renew(key, value, revision)` rewrites it only if `revision` is still the last one: the new
  revision, or None when the lease was lost (it expired and someone else acquired it, or it was
  released) — the caller must stop acting on it at once;
* `release(key, revision)` deletes it (if still ours), so a successor need not wait for the TTL;
* `holder(key)`: (value, revision) of a live lease, or None.

The server expires a key by its age, so a holder that stops renewing (it died, was stopped, lost
the cluster) loses the lease `ttl` seconds after its last renewal; the holder itself must treat the
lease as gone a margin earlier (its own clock), see aotx.runtime.ownership.
"""

from __future__ import annotations

import nats.js.errors
from nats.aio.client import Client
from nats.js.api import KeyValueConfig, StorageType

from .stream import replicas_for

ACQUIRE_ATTEMPTS = 3


class LeaseBucket:
    def __init__(self, kv, name: str, ttl: float) -> None:
        self._kv, self.name, self.ttl = kv, name, ttl

    @classmethod
    async def connect(cls, nc: Client, name: str, ttl: float, *, timeout: float = 5.0) -> "LeaseBucket":
        if not ttl > 0:
            raise ValueError(f"a lease TTL must be positive, got {ttl!r}")
        js = nc.jetstream(timeout=timeout)
        try:
            kv = await js.key_value(name)
        except nats.js.errors.BucketNotFoundError:
            kv = await js.create_key_value(KeyValueConfig(bucket=name, history=1, ttl=ttl, storage=StorageType.FILE,
                                                          replicas=replicas_for(nc)))
        return cls(kv, name, ttl)

    async def acquire(self, key: str, value: bytes) -> int | None:
        """nats-py's create, refused because the key has an entry, reads that entry (a live one, or a
        delete tombstone it may write over); an entry gone meanwhile (expired by the bucket's max age,
        or not on the replica that answered) raises KeyNotFoundError out of it. The key is free then:
        create is tried again, a few times; still racing, the lease is not acquired (None) this time."""
        for _ in range(ACQUIRE_ATTEMPTS):
            try:
                return await self._kv.create(key, value)
            except nats.js.errors.KeyWrongLastSequenceError:
                return None
            except nats.js.errors.KeyNotFoundError:
                continue
        return None

    async def renew(self, key: str, value: bytes, revision: int) -> int | None:
        try:
            return await self._kv.update(key, value, last=revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            return None

    async def release(self, key: str, revision: int) -> bool:
        try:
            await self._kv.delete(key, last=revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            return False   # not ours any more
        return True

    async def holder(self, key: str) -> tuple[bytes, int] | None:
        try:
            entry = await self._kv.get(key)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
        return entry.value or b"", entry.revision
