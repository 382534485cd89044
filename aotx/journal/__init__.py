"""The type-37 class-A journal codec: records, transfers, emitter, reassembler, lease records.

Pure byte formats; no I/O. See docs/JOURNAL-FORMAT.md.
"""

from .crc32c import crc32c
from .emitter import MAX_RECORDS_PER_TICK, Emitter, Tick
from .errors import JournalFormatError, LeaseError, RecordError, TransferError
from .lease import Lease, LeaseRevision, LeaseRow, RetentionMode, decode_lease, encode_lease
from .reassembler import Reassembler
from .record import HEADER_SIZE, MAX_BODY, RECORD_CLASS, RECORD_TYPE, Record, decode_records, iter_records
from .transfer import (
    DIGEST_SIZE, MAX_PAYLOAD, Transfer, TransferKind, lineage_hash, pack_body, split_transfer,
    transfer_digest, unpack_body,
)

__all__ = [
    "DIGEST_SIZE", "Emitter", "HEADER_SIZE", "JournalFormatError", "Lease", "LeaseError", "LeaseRevision",
    "LeaseRow", "MAX_BODY", "MAX_PAYLOAD", "MAX_RECORDS_PER_TICK", "RECORD_CLASS", "RECORD_TYPE", "Reassembler",
    "Record", "RecordError", "RetentionMode", "Tick", "Transfer", "TransferError", "TransferKind", "crc32c",
    "decode_lease", "decode_records", "encode_lease", "iter_records", "lineage_hash", "pack_body",
    "split_transfer", "transfer_digest", "unpack_body",
]
