"""The registry's payload decoder for the feed: msgpack bytes → event, with no dict in between.

`compile_struct(cls, tag, version, leaves)` writes, once at registration, a msgspec Struct that
mirrors the kind's body (a map: `kind` its tag, `v` its version, then each leaf's wire key) and a
function `build(s)` that turns a decoded Struct into the event, as aotx.journal.fast_decode builds
it from a dict. `PayloadDecoder(kinds)` decodes the payload of a transfer whose kinds are these
(one msgspec Decoder over their tagged union) straight into the event.

It is never looser than the dict path (aotx.journal.registry `decode`): msgspec checks what each
leaf's decoder says it accepts inline (`decode.inline`: bytes of a size, an unsigned integer,
a string, a boolean — exact types: no bool for an int, no str for bytes; an enum's members are
read as an int and looked up as the dict path does); any other leaf is decoded as a plain msgpack
value and given to its own `decode`. Unknown keys are refused, every key is required, and the map
header must count exactly the kind's keys (so no key appears twice). It does not name faults:
anything it declines (`decode` answers None) goes through the dict path, which names the fault
or, for a value it reads differently encoded (a map16 header), accepts it as always.
"""

from __future__ import annotations

import typing
from typing import Any, Callable, Literal, Optional, Sequence, Union

import msgspec

from .fast_decode import compile_builder
from .fields import Refused

# msgspec raises UnicodeDecodeError (a ValueError) for a tag that is not UTF-8
_DecodeErrors = (msgspec.MsgspecError, ValueError, Refused)


def _field_type(leaf: Any) -> tuple[Any, Optional[str]]:
    """The msgspec annotation of a leaf, and the check left to the builder ("members" or "decode")."""
    what, arg = getattr(leaf.decode, "inline", (None, None))
    if what == "bytes":
        return (bytes if arg is None else
                typing.Annotated[bytes, msgspec.Meta(min_length=int(arg), max_length=int(arg))]), None
    if what == "unsigned":   # msgpack holds no integer above 2**64 - 1
        return typing.Annotated[int, msgspec.Meta(ge=0)], None
    if what == "str":
        return str, None
    if what == "bool":
        return bool, None
    if what == "members":   # exactly the members' values (ints: msgspec checks the Literal inline)
        if arg and all(type(v) is int for v in arg):
            return Literal[tuple(sorted(arg))], "members"   # type: ignore[misc]
        return int, "members"
    return Any, "decode"


def field_name(leaf: Any) -> str:
    """The Struct attribute holding a leaf: its path with `_` for `.` (`op.lineage` → `op_lineage`)."""
    return leaf.path.replace(".", "_")


def compile_struct(cls: type, tag: str, version: int,
                   leaves: Sequence[Any]) -> tuple[type, Callable[[Any], Any], Optional[Callable[[Any], None]]]:
    """The Struct of `cls`'s body, the function building the event from one, and — where every leaf is
    checked inline (no leaf's own `decode` to call: nothing to build but the event) — the function that
    checks a Struct as the builder would without building it (raises Refused), else None."""
    fields: list[tuple[str, Any, Any]] = [("v", Literal[version], msgspec.field(name="v"))]
    ns: dict[str, Any] = {"_new": object.__new__, "_Refused": Refused}
    reads: list[list[str]] = []
    checks: list[str] = []
    for i, leaf in enumerate(leaves):
        hint, check = _field_type(leaf)
        f = field_name(leaf)
        fields.append((f, hint, msgspec.field(name=leaf.key)))
        x = f"x{i}"
        if check == "members":
            ns[f"m{i}"] = leaf.decode.inline[1]
            reads.append([f"{x} = m{i}.get(s.{f})", f"if {x} is None: raise _Refused"])
            if hint is int:   # (a Literal of the members' values is checked by msgspec itself)
                checks.append(f"if m{i}.get(s.{f}) is None: raise _Refused")
        elif check == "decode":
            ns[f"d{i}"] = leaf.decode
            reads.append([f"{x} = d{i}(s.{f})"])
            checks.append("")   # (a leaf decoded only by building: no check without the build)
        else:
            reads.append([f"{x} = s.{f}"])
    if len({name for name, _, _ in fields}) != len(fields):
        raise TypeError(f"{cls.__name__}: two leaves share the Struct field of {[n for n, _, _ in fields]}")
    struct = msgspec.defstruct(f"{cls.__name__}Body", fields, tag_field="kind", tag=tag,
                               forbid_unknown_fields=True, gc=False)
    check_only: Optional[Callable[[Any], None]] = None
    if "" not in checks:
        src = "def check(s):\n" + "".join(f"    {line}\n" for line in checks) + "    return None\n"
        exec(src, ns)   # noqa: S102 — generated from the class's own leaves, at registration
        check_only = ns["check"]
        check_only.nothing = not checks   # msgspec checked every leaf already: the feed need not call it
    return struct, compile_builder(cls, leaves, reads, ns, "s"), check_only


def _CHECKED(s: Any) -> None:
    """The check of a deferred kind whose every leaf msgspec checked while decoding: nothing left to call."""


class PayloadDecoder:
    """Payload bytes of one transfer kind → its event, or None where the dict path must decide. For a
    deferred kind (`check` given) → its checked Struct instead: the event is built from it only when
    read (aotx.journal.transfer WIRE_BUILDERS, Transfer.event)."""

    def __init__(self, kinds: Sequence[tuple[type, Callable[[Any], Any], int, Optional[Callable[[Any], None]]]]) -> None:
        """`kinds`: (Struct, build, number of keys, check or None) of each kind this transfer kind carries;
        a kind with a check is deferred: its Struct, checked as `build` checks it, is what the decoder yields."""
        structs = tuple(k[0] for k in kinds)
        decode = msgspec.msgpack.Decoder(Union[structs] if len(structs) > 1 else structs[0]).decode
        # the map header msgpack writes for each Struct's number of keys: exactly its keys, none twice
        # (compared as its first byte, an int, and for a map16 header its two count bytes after it)
        builds = {s: (b, 0x80 | n if n <= 15 else 0xDE, None if n <= 15 else n.to_bytes(2, "big"),
                      _CHECKED if c is not None and getattr(c, "nothing", False) else c) for s, b, n, c in kinds}

        def payload_event(payload: bytes) -> Any:
            try:
                try:
                    s = decode(payload)
                except TypeError:   # msgspec: a map whose key is a map or an array (unhashable), in a field it does not type
                    return None
                build, head, count, check = builds[s.__class__]
                if payload[0] != head or (count is not None and payload[1:3] != count):
                    return None
                if check is not None:   # deferred: checked now (where msgspec left a check), built when read
                    if check is not _CHECKED:
                        check(s)
                    return s
                return build(s)
            except _DecodeErrors:
                return None
        self.decode = payload_event   # what the feed calls (a plain function: one call less than __call__)

    def __call__(self, payload: bytes) -> Any:
        return self.decode(payload)
