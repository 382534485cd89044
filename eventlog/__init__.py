"""The durable event log: JetStream backend, embedded nats-server, recorder protocol.

Imports nothing of ours.
"""

from .binary import NatsServerNotFound, find_nats_server
from .connection import OutageLog, close_connection, drain_connection
from .errors import (
    ConcurrencyConflict,
    EventLogError,
    JournalFull,
    JournalHold,
    JournalUnavailable,
    MessageTooLarge,
    map_publish_error,
)
from .headers import Header
from .jetstream import JetStreamRecorder, JetStreamSubscription
from .media import MEDIA_BUCKET, MediaStore, StoredMedia
from .memory import MemoryRecorder, MemorySubscription
from .recorder import Ack, Recorder, StoredMessage, StreamStatus, Subscription
from .server import EmbeddedNats, NatsServerError
from .server_config import ServerSettings, render_config
from .stream import SUBJECT_PREFIX, StreamSpec, ensure_stream, journal_subject

__all__ = [
    "Ack", "ConcurrencyConflict", "EmbeddedNats", "EventLogError", "Header", "JetStreamRecorder",
    "JetStreamSubscription", "JournalFull", "MEDIA_BUCKET", "MediaStore", "JournalHold", "JournalUnavailable", "MemoryRecorder",
    "MemorySubscription", "MessageTooLarge", "NatsServerError", "NatsServerNotFound", "OutageLog", "Recorder",
    "SUBJECT_PREFIX", "ServerSettings", "StoredMedia", "StoredMessage", "StreamSpec", "StreamStatus", "Subscription",
    "close_connection", "drain_connection", "ensure_stream", "find_nats_server", "journal_subject", "map_publish_error", "render_config",
]
