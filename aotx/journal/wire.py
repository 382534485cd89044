"""Wire types of journalled event fields, declared once, on the event dataclass's own annotations.

An event is a frozen dataclass; `aotx.journal.registry` reads its fields (in declaration order) and
their annotations to encode and decode its msgpack body. What an annotation means on the wire:

* `bytes` — bin of any length; `B16` / `B32` (`Annotated[bytes, Fixed(n)]`) — bin of exactly n bytes;
* `U64` (`Annotated[int, Unsigned()]`) — an unsigned 64-bit integer;
* `str` — a msgpack str; `bool` — msgpack true / false;
* `tuple[bytes, ...]` / `tuple[str, ...]` — a msgpack array of bin / of str (decoded as a tuple);
* an `enum.IntFlag` — an unsigned integer whose bits are all members' (e.g. Rights);
  an `enum.IntEnum` — an unsigned integer that is one of its values (e.g. Scope);
* another dataclass (e.g. OpHeader) — its fields, flattened into the same map, in their order;
* `Annotated[T, Packed(encode, decode, errors)]` — bin holding `encode(value)`, read by `decode`,
  whose `errors` refuse the body (e.g. a lease's own byte format);
* extra metadata: `Wire("name")` keys the field `name` on the wire (not its attribute name);
  `Require(test, why)` refuses a decoded value for which `test` is false ("<value> is <why>").

Nothing else is a wire type: registering a class with another annotation fails at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable

U64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class Fixed:
    """bin of exactly `size` bytes."""

    size: int


@dataclass(frozen=True)
class Unsigned:
    """An unsigned 64-bit integer."""


@dataclass(frozen=True)
class Wire:
    """The field's key on the wire, where it differs from the attribute name."""

    name: str


@dataclass(frozen=True)
class Packed:
    """A value carried as bin: `encode(value) -> bytes`, `decode(bytes) -> value`; `errors` (exception
    types raised by either) refuse the value with their message."""

    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]
    errors: tuple[type[Exception], ...]


@dataclass(frozen=True)
class Require:
    """A decoded value must pass `test`; otherwise it is refused as "<value> is <why>"."""

    test: Callable[[Any], bool]
    why: str


B16 = Annotated[bytes, Fixed(16)]
B32 = Annotated[bytes, Fixed(32)]
U64 = Annotated[int, Unsigned()]
