"""Event fields → codecs: a dataclass's fields and their wire types (aotx.journal.wire), compiled once,
at registration, into a flat schema (for aotx.journal.registry).

A schema is the event's leaves in wire order — a nested dataclass (the operation header) is
flattened in place — each with its wire key, an `encode(field value) -> wire value` and a
`decode(wire value) -> field value`; both raise `Refused` for a value not of the field's wire type,
and encoding runs the decoder's checks, so what is written decodes. `get(event)` reads every leaf
value at once; `make(values)` builds the event (and its nested parts) back from them.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import typing
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .wire import U64_MAX, Fixed, Packed, Require, Unsigned, Wire


class Refused(Exception):
    """A field's value is not what its wire type wants; the message says why."""


def _got(want: str, value: Any) -> Refused:
    return Refused(f"expected {want}, got {value!r:.60}")


@dataclass(frozen=True)
class Leaf:
    key: str                        # on the wire
    path: str                       # the attribute path in the event ("op.lineage")
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


@dataclass(frozen=True)
class Schema:
    leaves: tuple[Leaf, ...]
    get: Callable[[Any], Sequence[Any]]
    make: Callable[[Sequence[Any]], Any]


def _unsigned(w: Any) -> int:
    if w.__class__ is not int or not 0 <= w <= U64_MAX:
        raise _got("an unsigned 64-bit integer", w)
    return w


def _to_unsigned(v: Any) -> int:
    if v.__class__ is int and 0 <= v <= U64_MAX:
        return v
    return _unsigned(int(v) if isinstance(v, int) and v.__class__ is not bool else v)


def _bytes(size: Optional[int]):
    want = f"{size} bytes" if size is not None else "bytes"

    def decode(w: Any) -> bytes:
        if not isinstance(w, bytes) or (size is not None and len(w) != size):
            raise _got(want, w)
        return w

    def encode(v: Any) -> bytes:
        if v.__class__ is bytes and (size is None or len(v) == size):
            return v
        return decode(bytes(v) if isinstance(v, (bytearray, memoryview)) else v)
    decode.inline = ("bytes", size)   # what it accepts, for aotx.journal.fast_decode  # type: ignore[attr-defined]
    return encode, decode


def _string(w: Any) -> str:
    if w.__class__ is not str:
        raise _got("a string", w)
    return w


_unsigned.inline = ("unsigned", None)   # type: ignore[attr-defined]
_string.inline = ("str", None)   # type: ignore[attr-defined]


def _boolean(w: Any) -> bool:
    if w.__class__ is not bool:
        raise _got("true or false", w)
    return w


_boolean.inline = ("bool", None)   # type: ignore[attr-defined]


def _array(item: tuple[Callable, Callable], want: str):
    """A msgpack array of one wire type, as a tuple."""
    encode_item, decode_item = item

    def decode(w: Any) -> tuple:
        if w.__class__ is not list:
            raise _got(f"an array of {want}", w)
        return tuple(decode_item(x) for x in w)

    def encode(v: Any) -> list:
        if not isinstance(v, (tuple, list)):
            raise _got(f"an array of {want}", v)
        return [encode_item(x) for x in v]
    return encode, decode


def _members(cls: type[enum.Enum], values: dict[int, Any], want: str):
    def decode(w: Any) -> Any:
        member = values.get(w) if w.__class__ is int else None
        if member is None:
            raise _got(want, w)
        return member
    decode.inline = ("members", values)   # type: ignore[attr-defined]
    return (lambda v: int(decode(_to_unsigned(v)))), decode


def _enum(cls: type[enum.IntEnum]):
    values = {int(m): m for m in cls}
    names = [str(v) for v in values]
    return _members(cls, values, f"{cls.__name__.lower()} {', '.join(names[:-1])} or {names[-1]}")


def _flags(cls: type[enum.IntFlag]):
    mask = 0
    for member in cls:
        mask |= int(member)
    if mask >= 1 << 12:
        raise TypeError(f"{cls.__name__}: flags wider than 12 bits are not a wire type")
    return _members(cls, {i: cls(i) for i in range(mask + 1)}, f"{cls.__name__.lower()} bits within 0..{mask}")


def _packed(p: Packed):
    def encode(v: Any) -> bytes:
        try:
            return p.encode(v)
        except p.errors as exc:
            raise Refused(str(exc)) from None

    def decode(w: Any) -> Any:
        if not isinstance(w, bytes):
            raise _got("bytes", w)
        try:
            return p.decode(w)
        except p.errors as exc:
            raise Refused(str(exc)) from None
    return encode, decode


def _required(r: Require, encode: Callable, decode: Callable):
    def checked(w: Any) -> Any:
        value = decode(w)
        if not r.test(value):
            raise Refused(f"{value.name.lower() if isinstance(value, enum.Enum) else repr(value)[:60]} is {r.why}")
        return value

    def encode_checked(v: Any) -> Any:
        w = encode(v)
        checked(w)
        return w
    return encode_checked, checked


def _codec(owner: str, attr: str, base: Any, meta: tuple) -> tuple[Callable, Callable]:
    packed = next((m for m in meta if isinstance(m, Packed)), None)
    if packed is not None:
        return _packed(packed)
    if base is bytes:
        return _bytes(next((m.size for m in meta if isinstance(m, Fixed)), None))
    if base is int and any(isinstance(m, Unsigned) for m in meta):
        return _to_unsigned, _unsigned
    if base is str:
        return _string, _string
    if base is bool:
        return _boolean, _boolean
    if typing.get_origin(base) is tuple:
        args = typing.get_args(base)
        if len(args) == 2 and args[1] is Ellipsis and args[0] in (bytes, str):
            return _array(_bytes(None) if args[0] is bytes else (_string, _string), args[0].__name__)
    if isinstance(base, type) and issubclass(base, enum.IntFlag):
        return _flags(base)
    if isinstance(base, type) and issubclass(base, enum.IntEnum):
        return _enum(base)
    raise TypeError(f"{owner}.{attr}: {base!r} {meta!r} is not a wire type (aotx.journal.wire)")


def _compile(cls: type, prefix: str) -> tuple[list[Leaf], Callable[[Sequence[Any]], Any]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    leaves: list[Leaf] = []
    parts: list[tuple[Optional[Callable], int, int]] = []   # (nested make or None, first leaf, end)
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            raise TypeError(f"{cls.__name__}.{f.name}: event fields are positional __init__ fields")
        hint = hints[f.name]
        base, meta = (typing.get_args(hint)[0], typing.get_args(hint)[1:]) \
            if typing.get_origin(hint) is typing.Annotated else (hint, ())
        start = len(leaves)
        if dataclasses.is_dataclass(base) and not meta:
            sub, sub_make = _compile(base, f"{prefix}{f.name}.")
            leaves += sub
            parts.append((sub_make, start, len(leaves)))
            continue
        encode, decode = _codec(cls.__name__, f.name, base, meta)
        for r in (m for m in meta if isinstance(m, Require)):
            encode, decode = _required(r, encode, decode)
        key = next((m.name for m in meta if isinstance(m, Wire)), f.name)
        leaves.append(Leaf(key, prefix + f.name, encode, decode))
        parts.append((None, start, start + 1))
    if all(nested is None for nested, _, _ in parts):
        return leaves, lambda values: cls(*values)
    return leaves, lambda values: cls(*[values[a] if nested is None else nested(values[a:b]) for nested, a, b in parts])


def compile_schema(cls: type) -> Schema:
    leaves, make = _compile(cls, "")
    get = operator.attrgetter(*(leaf.path for leaf in leaves))
    return Schema(tuple(leaves), get if len(leaves) > 1 else (lambda event: (get(event),)), make)
