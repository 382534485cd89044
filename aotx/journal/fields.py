"""Event fields → codecs: each dataclass field's wire type (aotx.journal.wire) compiled once, at
registration, into an encoder and a decoder (for aotx.journal.registry).

A leaf's `decode(wire value) -> field value` and `encode(field value) -> wire value` both refuse a
value that is not of its wire type (`Refused`, with the phrase that says why); encoding runs the
decoder's checks, so what is written decodes. A nested dataclass is flattened into the same map.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .wire import U64_MAX, Fixed, Packed, Require, Unsigned, Wire


class Refused(Exception):
    """A field's value is not what its wire type wants (`phrase` says why)."""

    def __init__(self, phrase: str) -> None:
        super().__init__(phrase)
        self.phrase, self.key = phrase, ""


def _got(want: str, value: Any) -> Refused:
    return Refused(f"expected {want}, got {value!r:.60}")


@dataclass(frozen=True)


class Field:
    """One field of an event class: a leaf (`key` on the wire, its codec) or a flattened dataclass."""

    attr: str
    key: str
    hint: Any
    encode: Optional[Callable[[Any], Any]] = None
    decode: Optional[Callable[[Any], Any]] = None
    nested: Optional[type] = None
    children: tuple["Field", ...] = ()


def _unsigned(w: Any) -> int:
    if type(w) is not int or not 0 <= w <= U64_MAX:
        raise _got("an unsigned 64-bit integer", w)
    return w


def _as_int(v: Any) -> Any:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _bytes(size: Optional[int]):
    want = f"{size} bytes" if size is not None else "bytes"

    def decode(w: Any) -> bytes:
        if not isinstance(w, bytes) or (size is not None and len(w) != size):
            raise _got(want, w)
        return w
    return (lambda v: decode(bytes(v) if isinstance(v, (bytearray, memoryview)) else v)), decode


def _string(w: Any) -> str:
    if type(w) is not str:
        raise _got("a string", w)
    return w


def _enum(cls: type[enum.IntEnum]):
    values = [str(int(m)) for m in cls]
    want = f"{cls.__name__.lower()} {', '.join(values[:-1])} or {values[-1]}"

    def decode(w: Any) -> enum.IntEnum:
        try:
            return cls(_unsigned(w))
        except ValueError:
            raise _got(want, w) from None
    return (lambda v: int(decode(_as_int(v)))), decode


def _flags(cls: type[enum.IntFlag]):
    mask = 0
    for member in cls:
        mask |= int(member)
    want = f"{cls.__name__.lower()} bits within 0..{mask}"

    def decode(w: Any) -> enum.IntFlag:
        if _unsigned(w) & ~mask:
            raise _got(want, w)
        return cls(w)
    return (lambda v: int(decode(_as_int(v)))), decode


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
    def check(w: Any) -> Any:
        value = decode(w)
        if not r.test(value):
            raise Refused(f"{value.name.lower() if isinstance(value, enum.Enum) else repr(value)[:60]} is {r.why}")
        return value
    return (lambda v: _pass(encode(v), check)), check


def _pass(w: Any, check: Callable) -> Any:
    check(w)
    return w


def _leaf(owner: str, attr: str, base: Any, meta: tuple) -> tuple[Callable, Callable]:
    packed = next((m for m in meta if isinstance(m, Packed)), None)
    if packed is not None:
        return _packed(packed)
    if base is bytes:
        return _bytes(next((m.size for m in meta if isinstance(m, Fixed)), None))
    if base is int and any(isinstance(m, Unsigned) for m in meta):
        return (lambda v: _unsigned(_as_int(v))), _unsigned
    if base is str:
        return _string, _string
    if isinstance(base, type) and issubclass(base, enum.IntFlag):
        return _flags(base)
    if isinstance(base, type) and issubclass(base, enum.IntEnum):
        return _enum(base)
    raise TypeError(f"{owner}.{attr}: {base!r} {meta!r} is not a wire type (aotx.journal.wire)")


def compile_fields(cls: type) -> tuple[Field, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        base, meta = (typing.get_args(hint)[0], typing.get_args(hint)[1:]) \
            if typing.get_origin(hint) is typing.Annotated else (hint, ())
        key = next((m.name for m in meta if isinstance(m, Wire)), f.name)
        if dataclasses.is_dataclass(base) and not meta:
            out.append(Field(f.name, key, hint, nested=base, children=compile_fields(base)))
            continue
        encode, decode = _leaf(cls.__name__, f.name, base, meta)
        for r in (m for m in meta if isinstance(m, Require)):
            encode, decode = _required(r, encode, decode)
        out.append(Field(f.name, key, hint, encode, decode))
    return tuple(out)


def wire_keys(fields: tuple[Field, ...]) -> list[str]:
    return [k for f in fields for k in (wire_keys(f.children) if f.nested else [f.key])]


def fill(body: dict, fields: tuple[Field, ...], obj: Any) -> None:
    for f in fields:
        value = getattr(obj, f.attr)
        if f.nested is not None:
            if not isinstance(value, f.nested):
                refused = _got(f"a {f.nested.__name__}", value)
                refused.key = f.attr
                raise refused
            fill(body, f.children, value)
            continue
        try:
            body[f.key] = f.encode(value)
        except Refused as r:
            r.key = r.key or f.key
            raise


def build(cls: type, fields: tuple[Field, ...], body: dict) -> Any:
    args = {}
    for f in fields:
        if f.nested is not None:
            args[f.attr] = build(f.nested, f.children, body)
            continue
        try:
            args[f.attr] = f.decode(body[f.key])
        except Refused as r:
            r.key = f.key
            raise
    return cls(**args)
