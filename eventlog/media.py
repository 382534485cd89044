"""MediaStore: uploaded blobs in a JetStream object store, keyed by their sha256, with uploaders.

Blobs live in the object store bucket (default AOTX_MEDIA, file storage) under their lowercase
hex sha256. Source ownership lives in a key-value bucket beside it (default AOTX_MEDIA_OWNERS,
file storage): one key `<sha256>.<sha256 of the uploader name>` per (blob, uploader). Both are
JetStream streams on disk, so both survive a restart of the runtime and of nats-server.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import nats.js.errors
from nats.aio.client import Client
from nats.js.api import KeyValueConfig, ObjectStoreConfig, StorageType

from .connect import NatsAuth, connect
from .connection import OutageLog, close_connection
from .stream import replicas_for

_log = logging.getLogger("eventlog.media")
MEDIA_BUCKET = "AOTX_MEDIA"
OWNERS_SUFFIX = "_OWNERS"


def media_publish_subjects(bucket: str = MEDIA_BUCKET) -> tuple[str, ...]:
    """Every subject a MediaStore client publishes to: its object store and owners' key-value bucket and
    their JetStream API requests. A nats user allowed these (and its inbox) stores and reads media and
    can reach no other stream (no journal write, purge or delete)."""
    owners = bucket + OWNERS_SUFFIX
    subjects = [f"$O.{bucket}.>", f"$KV.{owners}.>", "$JS.API.INFO", "$JS.API.STREAM.NAMES"]
    for stream in (f"OBJ_{bucket}", f"KV_{owners}"):
        subjects += [f"$JS.API.STREAM.{verb}.{stream}" for verb in ("INFO", "CREATE", "PURGE", "MSG.GET")]
        subjects += [f"$JS.API.DIRECT.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}.>",
                     f"$JS.API.CONSUMER.CREATE.{stream}", f"$JS.API.CONSUMER.CREATE.{stream}.>",
                     f"$JS.API.CONSUMER.DELETE.{stream}.>", f"$JS.API.CONSUMER.INFO.{stream}.>",
                     f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>", f"$JS.FC.{stream}.>", f"$JS.ACK.{stream}.>"]
    return tuple(subjects)


def _owner_key(sha256: str, uploader: str) -> str:
    return f"{sha256}.{hashlib.sha256(uploader.encode('utf-8')).hexdigest()}"


@dataclass(frozen=True)
class StoredMedia:
    sha256: str
    byte_length: int
    created: bool  # False: this uploader had uploaded these bytes before


class MediaStore:
    """Use `await MediaStore.connect(url)` (or `attach(nc)` on a connection someone else owns)."""

    def __init__(self, nc: Client, bucket: str, *, owns_connection: bool, timeout: float) -> None:
        self.nc, self.bucket, self.timeout = nc, bucket, timeout
        self.js = nc.jetstream(timeout=timeout)
        self._owns_connection = owns_connection
        self._obs = None
        self._kv = None

    @classmethod
    async def connect(cls, url: str, bucket: str = MEDIA_BUCKET, *, timeout: float = 10.0,
                      auth: NatsAuth | None = None) -> "MediaStore":
        outage = OutageLog(_log, "aotx-media", url)
        nc = await connect(url, auth, name="aotx-media", error_cb=outage.error, reconnected_cb=outage.reconnected,
                           max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        store = cls(nc, bucket, owns_connection=True, timeout=timeout)
        try:
            await store._ensure()
        except BaseException:
            await close_connection(nc, name="aotx-media")
            raise
        return store

    @classmethod
    async def attach(cls, nc: Client, bucket: str = MEDIA_BUCKET, *, timeout: float = 10.0) -> "MediaStore":
        store = cls(nc, bucket, owns_connection=False, timeout=timeout)
        await store._ensure()
        return store

    async def _ensure(self) -> None:
        try:
            self._obs = await self.js.object_store(self.bucket)
        except nats.js.errors.NotFoundError:
            self._obs = await self.js.create_object_store(
                self.bucket, config=ObjectStoreConfig(bucket=self.bucket, storage=StorageType.FILE,
                                                    replicas=replicas_for(self.nc)))
        owners = self.bucket + OWNERS_SUFFIX
        try:
            self._kv = await self.js.key_value(owners)
        except nats.js.errors.NotFoundError:
            self._kv = await self.js.create_key_value(KeyValueConfig(bucket=owners, storage=StorageType.FILE,
                                                                          replicas=replicas_for(self.nc)))

    async def put(self, data: bytes, uploader: str, media_type: str = "") -> StoredMedia:
        """Store `data` under its sha256 (once) and record `uploader` as one of its sources."""
        sha = hashlib.sha256(data).hexdigest()
        try:
            await self._obs.get_info(sha)
        except nats.js.errors.ObjectNotFoundError:
            await self._obs.put(sha, data)
        try:
            await self._kv.create(_owner_key(sha, uploader), media_type.encode("utf-8") or b"-")
            created = True
        except nats.js.errors.KeyWrongLastSequenceError:
            created = False
        return StoredMedia(sha, len(data), created)

    async def uploaded_by(self, sha256: str, uploader: str) -> bool:
        try:
            await self._kv.get(_owner_key(sha256, uploader))
            return True
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return False

    async def get(self, sha256: str) -> bytes | None:
        try:
            return (await self._obs.get(sha256)).data
        except nats.js.errors.ObjectNotFoundError:
            return None

    async def close(self) -> None:
        if self._owns_connection:
            await close_connection(self.nc, name="aotx-media")
