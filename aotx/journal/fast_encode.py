"""One generated body builder per registered kind: the registry's encode on the write path.

`compile_encoder(tag, version, leaves)` writes, once at registration, a function `fast(event)` that
returns the event's msgpack map — `kind`, `v`, then every leaf's wire key in wire order, as
`Registry.body` builds it leaf by leaf — reading each leaf's value by its attribute path and
taking it as it is where it already is its wire value (the cases a leaf's own `encode` returns its
argument unchanged: bytes of the leaf's size, an unsigned 64-bit int, a str, a bool: the leaf's
`decode.inline`, exact types only), else calling that leaf's `encode` (enums and flags, arrays,
packed values, checked fields, anything to convert). So it returns the same dict, and where any leaf
refuses its value (`Refused`) the registry encodes the event again leaf by leaf, which names the field
as before. tests/journal/test_event_registry.py holds the two equal for every kind.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .fast_decode import inline_mismatch


def _value(ns: dict[str, Any], i: int, leaf: Any) -> list[str]:
    """The lines putting leaf `i`'s wire value in `x{i}`."""
    x = f"x{i}"
    read = f"{x} = event.{leaf.path}"
    what, arg = getattr(leaf.decode, "inline", (None, None))
    ns[f"e{i}"] = leaf.encode
    mismatch = inline_mismatch(x, what, arg)
    if mismatch is not None:
        return [read, f"if {mismatch}: {x} = e{i}({x})"]
    return [f"{x} = e{i}(event.{leaf.path})"]


def compile_encoder(tag: str, version: int, leaves: Sequence[Any]) -> Callable[[Any], dict[str, Any]]:
    """The body builder of a kind `tag` at `version` whose schema has these leaves (wire order)."""
    ns: dict[str, Any] = {}
    lines = [line for i, leaf in enumerate(leaves) for line in _value(ns, i, leaf)]
    items = ", ".join([f"'kind': {tag!r}", f"'v': {int(version)}"] + [f"{leaf.key!r}: x{i}" for i, leaf in enumerate(leaves)])
    src = "def body(event):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {{{items}}}\n"
    exec(src, ns)   # noqa: S102 — generated from the class's own fields, at registration
    return ns["body"]
