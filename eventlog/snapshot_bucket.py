"""SnapshotBucket: named blobs (the projection's snapshots) in a JetStream object store beside the journal.

The bucket of journal stream S is `S_SNAPSHOTS` (stream `OBJ_S_SNAPSHOTS`, file storage, the journal's
replicas), so two journals never share one. A blob is written with the object store's put: its chunks
go to a fresh subject, then one meta message names them. A put cut short (kill -9, a lost connection)
leaves chunks that no meta names: no reader ever sees them, and `collect` purges them. `get` reads a
blob back with a pull consumer, bounded in time, and checks it against its meta's size and SHA-256;
anything else raises BlobUnreadable. `remove` purges the meta and then the chunks (no tombstones pile
up). This module knows nothing of what a blob holds (aotx.snapshot does).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, ObjectStoreConfig, StorageType

from .connect import NatsAuth, connect
from .connection import OutageLog, close_connection
from .stream import replicas_for
from .errors import EventLogError

_log = logging.getLogger("eventlog.snapshots")
SNAPSHOTS_SUFFIX = "_SNAPSHOTS"
_FETCH = 64   # chunks per pull


class BlobUnreadable(EventLogError):
    """A named blob is missing, deleted, cut short or does not match its meta's size or digest."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"snapshot blob {name}: {reason}")
        self.name, self.reason = name, reason


def snapshot_bucket_name(stream: str) -> str:
    """The object store bucket of the journal stream `stream`."""
    return stream + SNAPSHOTS_SUFFIX


def snapshot_publish_subjects(stream: str) -> tuple[str, ...]:
    """What a writer of the snapshots of `stream` publishes to besides the JetStream API ($JS.API.>)."""
    return (f"$O.{snapshot_bucket_name(stream)}.>",)


def _meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode('utf-8')).decode('ascii')}"


def _chunk_subject(bucket: str, nuid: str) -> str:
    return f"$O.{bucket}.C.{nuid}"


class SnapshotBucket:
    """Use `await SnapshotBucket.connect(url, stream)` (its own connection) or `attach(nc, stream)`."""

    def __init__(self, nc: Client, stream: str, *, owns_connection: bool, timeout: float, replicas: int | None) -> None:
        self.nc, self.timeout, self.replicas = nc, timeout, replicas
        self.bucket = snapshot_bucket_name(stream)
        self.stream = f"OBJ_{self.bucket}"
        self.js = nc.jetstream(timeout=timeout)
        self._owns_connection = owns_connection
        self._obs = None

    @classmethod
    async def connect(cls, url: str, stream: str, *, auth: NatsAuth | None = None, timeout: float = 10.0,
                      replicas: int | None = None, name: str = "aotx-snapshots") -> "SnapshotBucket":
        outage = OutageLog(_log, name, url)
        nc = await connect(url, auth, name=name, error_cb=outage.error, reconnected_cb=outage.reconnected,
                           max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        bucket = cls(nc, stream, owns_connection=True, timeout=timeout, replicas=replicas)
        try:
            await bucket._ensure()
        except BaseException:
            await close_connection(nc, name=name)
            raise
        return bucket

    @classmethod
    async def attach(cls, nc: Client, stream: str, *, timeout: float = 10.0, replicas: int | None = None) -> "SnapshotBucket":
        bucket = cls(nc, stream, owns_connection=False, timeout=timeout, replicas=replicas)
        await bucket._ensure()
        return bucket

    async def _ensure(self) -> None:
        try:
            self._obs = await self.js.object_store(self.bucket)
        except nats.js.errors.NotFoundError:
            self._obs = await self.js.create_object_store(
                self.bucket, config=ObjectStoreConfig(storage=StorageType.FILE,
                                                      replicas=replicas_for(self.nc, self.replicas)))

    async def _subjects(self, kind: str) -> list[str]:
        info = await self.js.stream_info(self.stream, subjects_filter=f"$O.{self.bucket}.{kind}.>")
        return sorted((info.state.subjects or {}).keys())

    async def names(self) -> list[str]:
        """The names of the blobs a meta message names now (unordered; tombstones included)."""
        out = []
        for subject in await self._subjects("M"):
            token = subject.rsplit(".", 1)[-1]
            try:
                out.append(base64.urlsafe_b64decode(token).decode("utf-8"))
            except (binascii.Error, UnicodeDecodeError):
                _log.warning("snapshot bucket %s: meta subject %s names no readable object", self.bucket, subject)
        return out

    async def put(self, name: str, data: bytes) -> None:
        await self._obs.put(name, data)

    async def get(self, name: str) -> bytes:
        """The blob's bytes, checked against its meta; BlobUnreadable otherwise."""
        try:
            info = await self._obs.get_info(name)
        except nats.js.errors.ObjectNotFoundError:
            raise BlobUnreadable(name, "no such object") from None
        except nats.js.errors.BadObjectMetaError:
            raise BlobUnreadable(name, "its meta message is not an object description") from None
        if info.deleted or not info.nuid or info.size is None or not info.digest:
            raise BlobUnreadable(name, "its meta names no content (deleted)")
        try:
            data = await asyncio.wait_for(self._read(_chunk_subject(self.bucket, info.nuid), info.size),
                                          timeout=self.timeout + info.size / 1e6)   # ≥ 1 MB/s, or it is stuck
        except asyncio.TimeoutError:
            raise BlobUnreadable(name, f"its {info.size} bytes did not arrive within the time bound") from None
        if len(data) != info.size:
            raise BlobUnreadable(name, f"{len(data)} bytes stored, its meta says {info.size}")
        want = info.digest.split("=", 1)[-1] if info.digest.upper().startswith("SHA-256=") else None
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode("ascii")
        if want is None or got.rstrip("=") != want.rstrip("="):
            raise BlobUnreadable(name, "its bytes do not match the SHA-256 of its meta")
        return bytes(data)

    async def _read(self, subject: str, size: int) -> bytearray:
        data = bytearray()
        if size == 0:
            return data
        config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, mem_storage=True,
                                inactive_threshold=60.0, num_replicas=1)
        sub = await self.js.pull_subscribe(subject, stream=self.stream, config=config)
        try:
            remaining = (await sub.consumer_info()).num_pending
            while remaining > 0 and len(data) < size:
                try:
                    msgs = await sub.fetch(min(_FETCH, remaining), timeout=self.timeout)
                except nats.errors.TimeoutError:
                    break   # purged under us: what arrived is checked by the caller
                for msg in msgs:
                    data += msg.data
                    remaining = msg.metadata.num_pending
        finally:
            try:
                await sub.unsubscribe()
            except nats.errors.Error as exc:   # the consumer expires by itself (inactive_threshold)
                _log.debug("snapshot bucket %s: unsubscribe: %s", self.bucket, exc)
        return data

    async def remove(self, name: str) -> None:
        """Purge the blob's meta (it is gone for every reader at once), then its chunks."""
        try:
            info = await self._obs.get_info(name, show_deleted=True)
        except (nats.js.errors.ObjectNotFoundError, nats.js.errors.BadObjectMetaError):
            info = None
        await self.js.purge_stream(self.stream, subject=_meta_subject(self.bucket, name))
        if info is not None and info.nuid:
            await self.js.purge_stream(self.stream, subject=_chunk_subject(self.bucket, info.nuid))

    async def collect(self) -> int:
        """Purge chunks no meta names (what a put cut short left); how many chunk subjects were purged.
        Call it only while no put of this bucket is under way."""
        live = set()
        for name in await self.names():
            try:
                info = await self._obs.get_info(name, show_deleted=True)
            except (nats.js.errors.ObjectNotFoundError, nats.js.errors.BadObjectMetaError):
                continue
            if info.nuid and not info.deleted:
                live.add(info.nuid)
        purged = 0
        for subject in await self._subjects("C"):
            if subject.rsplit(".", 1)[-1] not in live:
                await self.js.purge_stream(self.stream, subject=subject)
                purged += 1
        return purged

    async def close(self) -> None:
        if self._owns_connection:
            await close_connection(self.nc, name="aotx-snapshots")
