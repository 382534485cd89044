"""One generated decoder per registered kind: the registry's hot path (boot replays every event).

`compile_decoder(cls, leaves)` writes, once at registration, a function `fast(body)` that reads
each leaf's wire key from an unpacked body, checks it as that leaf's own `decode` does
(aotx.journal.fields) — inline where the decoder says what it accepts (`decode.inline`: bytes of
a size, an unsigned 64-bit integer, a string, a boolean, an enum's members; exact types only, so
the inline check is never looser than the decoder's), else by calling it — and builds the event and its nested parts (the operation
header) directly — `object.__new__` and the instance dict set at once, as a frozen dataclass's
`__init__` would leave them (event classes are plain frozen dataclasses with positional fields
and no `__post_init__`; a class with one, or with slots, is built through its `__init__`).

It does not name faults: the registry checks the body's kind and version first, and where a key
is missing (KeyError) or a leaf refuses its value (`Refused`), or the body has another number of
keys, decodes it again leaf by leaf, which names the fault as before. The result is equal to what the leaf-by-leaf decode builds (tests/journal/test_event_registry.py::test_the_generated_decoder_builds_what_the_class_builds).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Sequence

from .fields import Refused
from .wire import U64_MAX


def _direct(cls: type) -> bool:
    """May an instance be built without `__init__` (no __post_init__, no slots)?"""
    return not hasattr(cls, "__post_init__") and "__slots__" not in vars(cls) and \
        all(f.init for f in dataclasses.fields(cls))


def inline_mismatch(x: str, what: str | None, arg: Any) -> str | None:
    """The condition under which `x` is not the wire value of a leaf checked inline as `what` (bytes of a
    size, unsigned, str, bool), or None where the leaf is not of those (shared with aotx.journal.fast_encode)."""
    if what == "bytes":
        return f"{x}.__class__ is not bytes" + ("" if arg is None else f" or len({x}) != {int(arg)}")
    if what == "unsigned":
        return f"{x}.__class__ is not int or not 0 <= {x} <= {U64_MAX}"
    if what in ("str", "bool"):
        return f"{x}.__class__ is not {what}"
    return None


def _leaf(ns: dict[str, Any], i: int, leaf: Any) -> list[str]:
    """The lines that read leaf `i` into `x{i}`, raising Refused where its decoder would refuse."""
    x = f"x{i}"
    read = f"{x} = body[{leaf.key!r}]"
    what, arg = getattr(leaf.decode, "inline", (None, None))
    mismatch = inline_mismatch(x, what, arg)
    if mismatch is not None:
        return [read, f"if {mismatch}: raise _Refused"]
    if what == "members":
        ns[f"m{i}"] = arg
        return [read, f"{x} = m{i}.get({x}) if {x}.__class__ is int else None",
                f"if {x} is None: raise _Refused"]
    ns[f"d{i}"] = leaf.decode
    return [f"{x} = d{i}(body[{leaf.key!r}])"]


def compile_decoder(cls: type, leaves: Sequence[Any]) -> Callable[[dict], Any]:
    """The decoder of `cls` events whose schema has these leaves (in wire order, nested parts flattened)."""
    ns: dict[str, Any] = {"_new": object.__new__, "_Refused": Refused}
    return compile_builder(cls, leaves, [_leaf(ns, i, leaf) for i, leaf in enumerate(leaves)], ns, "body")


def compile_builder(cls: type, leaves: Sequence[Any], reads: Sequence[list[str]], ns: dict[str, Any],
                    arg: str) -> Callable[[Any], Any]:
    """A function of `arg` that builds a `cls` event: `reads[i]` are the lines putting leaf i's value in
    `x{i}` (names they use are in `ns`); the event's nested parts are built first, each field from its leaf."""
    lines: list[str] = []
    at = iter(range(len(leaves)))

    def build(c: type, path: str) -> str:
        """Emit the lines building a `c` (its nested parts first); the name of the local holding it."""
        hints = typing.get_type_hints(c, include_extras=True)
        args = []
        for f in dataclasses.fields(c):
            hint = hints[f.name]
            if typing.get_origin(hint) is not typing.Annotated and dataclasses.is_dataclass(hint):
                args.append((f.name, build(hint, f"{path}{f.name}.")))
                continue
            i = next(at)
            if leaves[i].path != path + f.name:
                raise TypeError(f"{cls.__name__}: leaf {leaves[i].path} where {path + f.name} was expected")
            lines.extend(reads[i])
            args.append((f.name, f"x{i}"))
        k = len(lines)
        ns[f"C{k}"] = c
        if _direct(c):
            lines.append(f"v{k} = _new(C{k}); v{k}.__dict__.update({', '.join(f'{n}={v}' for n, v in args)})")
        else:
            lines.append(f"v{k} = C{k}({', '.join(v for _, v in args)})")
        return f"v{k}"

    result = build(cls, "")
    if next(at, None) is not None:
        raise TypeError(f"{cls.__name__}: a leaf of the schema is not a field")
    src = f"def build({arg}):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {result}\n"
    exec(src, ns)   # noqa: S102 — generated from the class's own fields, at registration
    return ns["build"]
