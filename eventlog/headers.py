"""Header names the log sets or reads, in one place."""

from __future__ import annotations

import enum


class Header(str, enum.Enum):
    """JetStream publish headers used by the recorder."""

    MSG_ID = "Nats-Msg-Id"
    EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
    EXPECTED_STREAM = "Nats-Expected-Stream"
    BATCH_ID = "Nats-Batch-Id"              # atomic batch publish (ADR-50)
    BATCH_SEQUENCE = "Nats-Batch-Sequence"  # 1..n within the batch
    BATCH_COMMIT = "Nats-Batch-Commit"      # "1" on the last message, sent as a request: one ack

    def __str__(self) -> str:
        return self.value
