"""The mutation envelope and canonical bytes.

Every POST body carries `schema`, `lineage`, `operation_key` (nonzero 16 bytes, 32 lowercase
hex) and `sequence` (a canonical decimal string: no sign, no leading zero, 1..2^64-1).
The canonical bytes of a mutation are the compact JSON (sorted keys, `,` and `:`
separators, UTF-8, no ASCII escaping) of its *validated and resolved* fields: the envelope,
`mutation` (its kind), the path's resource and the body fields with defaults filled in.
The runtime compares these bytes byte-for-byte to tell an exact retry from a changed input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from .. import strict_json
from .errors import IdError, MalformedMutation
from .ids import parse_hex16

SCHEMA = "aotx.shared.mutation.v1"
ENVELOPE_FIELDS = ("schema", "lineage", "operation_key", "sequence")
MAX_SEQUENCE = (1 << 64) - 1
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_new = object.__new__


@dataclass(frozen=True)
class Envelope:
    lineage: bytes
    operation_key: bytes
    sequence: int

    def __post_init__(self) -> None:
        if len(self.lineage) != 16:
            raise MalformedMutation(f"lineage must be 16 bytes, got {len(self.lineage)}")
        if len(self.operation_key) != 16 or self.operation_key == bytes(16):
            raise MalformedMutation("operation_key must be 16 nonzero bytes")
        if type(self.sequence) is not int or not 1 <= self.sequence <= MAX_SEQUENCE:
            raise MalformedMutation(f"sequence must be in 1..{MAX_SEQUENCE}, got {self.sequence!r}")

    def fields(self) -> dict[str, str]:
        return {"schema": SCHEMA, "lineage": self.lineage.hex(), "operation_key": self.operation_key.hex(),
                "sequence": str(self.sequence)}


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):   # (the loop below runs only then: it names the first key seen twice)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise MalformedMutation(f"field {key!r} appears twice")
            seen.add(key)
    return out


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """Strict UTF-8 JSON object: invalid UTF-8, duplicate keys, non-objects → 400; and the bounds of
    aotx.strict_json (nesting depth, NaN/Infinity, infinite numbers, over-long integers) → 400."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMutation(f"body is not valid UTF-8 at byte {exc.start}") from None
    try:
        value = strict_json.loads(text, object_pairs_hook=_no_duplicates)
    except strict_json.JsonInputError as exc:
        raise MalformedMutation(f"body refused: {exc}") from None
    except json.JSONDecodeError as exc:
        raise MalformedMutation(f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(value, dict):
        raise MalformedMutation(f"body must be a JSON object, got {type(value).__name__}")
    return value


def parse_counter(text: object, what: str, *, minimum: int = 1) -> int:
    """A canonical decimal string counter in minimum..2^64-1."""
    if not isinstance(text, str):
        raise MalformedMutation(f"{what} must be a decimal string, got {type(text).__name__}")
    if not _DECIMAL.fullmatch(text):
        raise MalformedMutation(f"{what} {text!r} is not a canonical decimal string "
                                "(digits only, no sign, no leading zero)")
    value = int(text)
    if not minimum <= value <= MAX_SEQUENCE:
        raise MalformedMutation(f"{what} {text} is outside {minimum}..{MAX_SEQUENCE}")
    return value


_KNOWN: dict[tuple[str, ...], frozenset[str]] = {}   # a kind's allowed body fields + the envelope's, made once


def check_fields(body: Mapping[str, Any], allowed: tuple[str, ...], kind: str) -> None:
    known = _KNOWN.get(allowed)
    if known is None:
        known = _KNOWN[allowed] = frozenset(ENVELOPE_FIELDS) | frozenset(allowed)
    unknown = body.keys() - known
    if unknown:
        raise MalformedMutation(f"{kind}: unknown field {sorted(unknown)[0]!r}")
    missing = [name for name in ENVELOPE_FIELDS if name not in body]
    if missing:
        raise MalformedMutation(f"{kind}: missing envelope field {missing[0]!r}")


def parse_envelope(body: Mapping[str, Any]) -> Envelope:
    if body.get("schema") != SCHEMA:
        raise MalformedMutation(f"schema must be {SCHEMA!r}, got {body.get('schema')!r}")
    lineage, key = body.get("lineage"), body.get("operation_key")
    try:
        lineage = _hex16(lineage) or parse_hex16(lineage, "lineage")
        key = _hex16(key) or parse_hex16(key, "operation_key", nonzero=True)
    except IdError as exc:
        raise MalformedMutation(str(exc)) from None
    return _checked_envelope(lineage, key, parse_counter(body.get("sequence"), "sequence"))


def _checked_envelope(lineage: bytes, operation_key: bytes, sequence: int) -> Envelope:
    """Envelope(...) of parts parse_envelope has checked as its __post_init__ checks them (16 bytes each,
    a nonzero key, a sequence in 1..MAX_SEQUENCE): the frozen fields set directly, not checked twice."""
    env = _new(Envelope)
    fields = env.__dict__
    fields["lineage"], fields["operation_key"], fields["sequence"] = lineage, operation_key, sequence
    return env


_HEX32 = re.compile(r"[0-9a-f]{32}")
_ZERO16 = bytes(16)


def _hex16(text: object) -> bytes | None:
    """ids.parse_hex16's answer for a valid nonzero value, else None (parse_hex16 then names what is wrong)."""
    if type(text) is str and _HEX32.fullmatch(text):
        raw = bytes.fromhex(text)
        return raw if raw != _ZERO16 else None
    return None


def canonical_json(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")
