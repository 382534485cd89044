"""Journal codec errors. Every one says exactly what is wrong and where."""

from __future__ import annotations


class JournalFormatError(ValueError):
    """Base of every journal decoding or consistency error."""


class RecordError(JournalFormatError):
    """A record could not be parsed from a journal message."""

    def __init__(self, reason: str, *, offset: int, position: int | None = None,
                 transfer_id: int | None = None, part_index: int | None = None) -> None:
        where = f"message {position} " if position is not None else ""
        ident = f" (transfer {transfer_id} part {part_index})" if transfer_id is not None else ""
        super().__init__(f"{where}record at byte {offset}{ident}: {reason}")
        self.reason, self.offset, self.position = reason, offset, position
        self.transfer_id, self.part_index = transfer_id, part_index


class TransferError(JournalFormatError):
    """A transfer is partial or inconsistent. `code` names the class of fault."""

    def __init__(self, code: str, reason: str, *, transfer_id: int, part_index: int | None,
                 part_count: int | None = None, kind: int | None = None,
                 lineage_hash: int | None = None, position: int | None = None) -> None:
        part = "" if part_index is None else f" part {part_index}" + (f"/{part_count}" if part_count else "")
        extra = []
        if kind is not None:
            extra.append(f"kind {kind}")
        if lineage_hash is not None:
            extra.append(f"lineage {lineage_hash:#018x}")
        if position is not None:
            extra.append(f"message {position}")
        ctx = f" ({', '.join(extra)})" if extra else ""
        super().__init__(f"transfer {transfer_id}{part}{ctx}: {code}: {reason}")
        self.code, self.reason = code, reason
        self.transfer_id, self.part_index, self.part_count = transfer_id, part_index, part_count
        self.kind, self.lineage_hash, self.position = kind, lineage_hash, position


class LeaseError(JournalFormatError):
    """A lease record is malformed; `row` is the offending row index (None for the header)."""

    def __init__(self, reason: str, *, row: int | None = None) -> None:
        where = "lease header" if row is None else f"lease row {row}"
        super().__init__(f"{where}: {reason}")
        self.reason, self.row = reason, row
