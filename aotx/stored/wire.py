"""The stored port's values between a gateway and a runtime (aotx.runtime.stored_rpc): msgpack.

What crosses is exactly what the in-process port takes and answers: a stored command (aotx.stored.
commands), an outcome (Saved, StoredRefusal, KeyLookup), a read's view (ResponseView, Page,
ResponseEvents, ConversationView) or plain JSON values. Packed with `strict_types`, so that what comes
out is equal to what went in, type for type:

* a dataclass of this package: ext 1, the array [class name, field values in declaration order];
* one of its enumerations: ext 2, [enum name, member name];
* a tuple: ext 3, its items (a list stays a list);
* an integer outside msgpack's 64 bits (JSON allows any): ext 4, its decimal text;
* a mapping that is not a plain dict (a request's JSON object may be one): packed as a dict.

Only the classes named here are made on unpacking (an unknown name is a WireError, never a lookup by
name elsewhere). Not a journal format: nothing packed here is stored; both ends run the same release.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import msgpack

from . import commands, outcomes, queries, vocab

_DATACLASS, _ENUM, _TUPLE, _BIGINT = 1, 2, 3, 4


class WireError(ValueError):
    """Bytes that are not a stored port value of this release."""


def _named(module, kinds) -> dict[str, type]:
    return {name: cls for name, cls in vars(module).items()
            if isinstance(cls, type) and cls.__module__ == module.__name__ and kinds(cls)}


_CLASSES: dict[str, type] = {**_named(commands, dataclasses.is_dataclass), **_named(outcomes, dataclasses.is_dataclass),
                             **_named(queries, dataclasses.is_dataclass)}
_ENUMS: dict[str, type] = _named(vocab, lambda cls: issubclass(cls, enum.Enum))


def _default(obj: Any) -> Any:
    if isinstance(obj, enum.Enum):
        return msgpack.ExtType(_ENUM, msgpack.packb([type(obj).__name__, obj.name]))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        if _CLASSES.get(cls.__name__) is not cls:
            raise TypeError(f"{cls.__name__} is not a stored port value")
        return msgpack.ExtType(_DATACLASS, pack([cls.__name__, [getattr(obj, f.name) for f in dataclasses.fields(obj)]]))
    if isinstance(obj, tuple):
        return msgpack.ExtType(_TUPLE, pack(list(obj)))
    if isinstance(obj, bool):   # a bool subclass (never from JSON); packed as the bool it is
        return bool(obj)
    if isinstance(obj, int):    # outside 64 bits, or an int subclass
        return msgpack.ExtType(_BIGINT, str(int(obj)).encode())
    if isinstance(obj, Mapping):
        return dict(obj)
    for plain in (list, str, bytes, float):   # a subclass of a plain kind: packed as that kind
        if isinstance(obj, plain):
            return plain(obj)
    raise TypeError(f"{type(obj).__name__} is not a stored port value")


def _ext(code: int, data: bytes) -> Any:
    if code == _TUPLE:
        return tuple(_unpack(data))
    if code == _BIGINT:
        return int(data.decode())
    name, rest = _unpack(data)
    if code == _ENUM:
        kind = _ENUMS.get(name)
        if kind is None or rest not in kind.__members__:
            raise WireError(f"unknown enumeration value {name}.{rest}")
        return kind[rest]
    if code == _DATACLASS:
        cls = _CLASSES.get(name)
        if cls is None:
            raise WireError(f"unknown stored port value {name!r}")
        return cls(*rest)
    raise WireError(f"unknown msgpack extension {code}")


def pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, ext_hook=_ext, strict_map_key=False)


def unpack(data: bytes) -> Any:
    """The value `pack` packed; WireError for anything else."""
    try:
        return _unpack(data)
    except WireError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise WireError(f"not a stored port value: {type(exc).__name__}: {exc}") from exc
