"""Resource IDs: `{prefix}-{lineage}-{id}`, each part 32 lowercase hex digits (16 bytes).

Prefixes: `spc` (space), `con` (conversation), `op` (operation), `par` (participant).
Also the bare 32-hex forms used by the mutation envelope (lineage, operation key).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from .errors import IdError

_HEX32 = re.compile(r"[0-9a-f]{32}")
_ANY_HEX32 = re.compile(r"[0-9a-fA-F]{32}")


class IdKind(enum.Enum):
    SPACE = "spc"
    CONVERSATION = "con"
    OPERATION = "op"
    PARTICIPANT = "par"


@dataclass(frozen=True)
class ResourceId:
    """A parsed resource ID: its kind, lineage (16 bytes) and id (16 bytes)."""

    kind: IdKind
    lineage: bytes
    ident: bytes

    def __post_init__(self) -> None:
        if len(self.lineage) != 16 or len(self.ident) != 16:
            raise IdError(f"{self.kind.value} ID parts must be 16 bytes each, "
                          f"got {len(self.lineage)} and {len(self.ident)}")

    def __str__(self) -> str:
        return format_id(self.kind, self.lineage, self.ident)


def parse_hex16(text: object, what: str, *, nonzero: bool = False) -> bytes:
    """32 lowercase hex digits → 16 bytes; precise errors for every other form."""
    if not isinstance(text, str):
        raise IdError(f"{what} must be a string of 32 lowercase hex digits, got {type(text).__name__}")
    if len(text) != 32:
        raise IdError(f"{what} must be 32 lowercase hex digits, got {len(text)} characters")
    if not _HEX32.fullmatch(text):
        if _ANY_HEX32.fullmatch(text):
            raise IdError(f"{what} must use lowercase hex digits")
        raise IdError(f"{what} contains a character that is not a hex digit")
    raw = bytes.fromhex(text)
    if nonzero and raw == bytes(16):
        raise IdError(f"{what} must be nonzero")
    return raw


def format_id(kind: IdKind, lineage: bytes, ident: bytes) -> str:
    if len(lineage) != 16 or len(ident) != 16:
        raise IdError(f"{kind.value} ID parts must be 16 bytes each, got {len(lineage)} and {len(ident)}")
    return f"{kind.value}-{lineage.hex()}-{ident.hex()}"


def parse_id(text: object, kind: IdKind) -> ResourceId:
    """Parse `{prefix}-{lineage}-{id}` for the given kind; IdError says which part is wrong."""
    name = f"{kind.name.lower()} ID"
    if not isinstance(text, str):
        raise IdError(f"{name} must be a string, got {type(text).__name__}")
    parts = text.split("-")
    if len(parts) != 3:
        raise IdError(f"{name} {text!r} must have the form {kind.value}-<32 hex>-<32 hex>")
    prefix, lineage, ident = parts
    if prefix != kind.value:
        raise IdError(f"{name} {text!r} must start with {kind.value!r}, not {prefix!r}")
    return ResourceId(kind, parse_hex16(lineage, f"{name} lineage"), parse_hex16(ident, f"{name} id"))
