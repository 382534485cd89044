"""The durable event log: JetStream backend, embedded nats-server, recorder protocol.

Imports nothing of ours.
"""

from .binary import NatsServerNotFound, find_nats_server
from .connect import NatsAuth, NatsAuthorizationError, connect, flush_subscriptions, redact_url
from .connection import OutageLog, close_connection, drain_connection
from .dirlock import DirectoryLock, DirectoryLocked
from .errors import (
    AtomicBatchUnsupported,
    BatchTooLarge,
    ConcurrencyConflict,
    DuplicateInBatch,
    EventLogError,
    JournalFull,
    JournalHold,
    JournalUnavailable,
    MessageTooLarge,
    map_publish_error,
)
from .headers import Header
from .jetstream import JetStreamRecorder, JetStreamSubscription
from .leases import LeaseBucket
from .media import MEDIA_BUCKET, MediaStore, StoredMedia, media_publish_subjects
from .memory import MemoryRecorder, MemorySubscription
from .recorder import MAX_BATCH_MESSAGES, Ack, BatchMessage, Recorder, StoredMessage, StreamStatus, Subscription
from .server import EmbeddedNats, NatsServerError
from .cluster import EmbeddedCluster
from .server_auth import DEFAULT_USER, NatsPermissions, NatsUser, stored_auth
from .server_config import ServerSettings, render_config
from .snapshot_bucket import BlobUnreadable, SnapshotBucket, snapshot_bucket_name, snapshot_publish_subjects
from .stream import SUBJECT_PREFIX, StreamSpec, ensure_stream, journal_subject

__all__ = [
    "Ack", "AtomicBatchUnsupported", "BatchMessage", "BatchTooLarge", "BlobUnreadable", "ConcurrencyConflict",
    "DuplicateInBatch", "MAX_BATCH_MESSAGES", "DEFAULT_USER", "DirectoryLock", "DirectoryLocked", "EmbeddedCluster",
    "EmbeddedNats",
    "EventLogError", "Header", "JetStreamRecorder",
    "JetStreamSubscription", "JournalFull", "MEDIA_BUCKET", "MediaStore", "JournalHold", "JournalUnavailable", "LeaseBucket", "MemoryRecorder",
    "MemorySubscription", "MessageTooLarge", "NatsAuth", "NatsAuthorizationError", "NatsPermissions",
    "NatsServerError", "NatsUser", "NatsServerNotFound", "OutageLog", "Recorder",
    "SUBJECT_PREFIX", "ServerSettings", "SnapshotBucket", "StoredMedia", "StoredMessage", "StreamSpec", "StreamStatus", "Subscription",
    "close_connection", "connect", "drain_connection", "flush_subscriptions", "ensure_stream", "find_nats_server", "journal_subject",
    "map_publish_error", "media_publish_subjects", "redact_url", "render_config", "snapshot_bucket_name", "snapshot_publish_subjects",
    "stored_auth",
]
