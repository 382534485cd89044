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
    if what == "members":
        return int, "members"
    return Any, "decode"


def compile_struct(cls: type, tag: str, version: int, leaves: Sequence[Any]) -> tuple[type, Callable[[Any], Any]]:
    """The Struct of `cls`'s body and the function building the event from one."""
    fields: list[tuple[str, Any, Any]] = [("v", Literal[version], msgspec.field(name="v"))]
    ns: dict[str, Any] = {"_new": object.__new__, "_Refused": Refused}
    reads: list[list[str]] = []
    for i, leaf in enumerate(leaves):
        hint, check = _field_type(leaf)
        fields.append((f"f{i}", hint, msgspec.field(name=leaf.key)))
        x = f"x{i}"
        if check == "members":
            ns[f"m{i}"] = leaf.decode.inline[1]
            reads.append([f"{x} = m{i}.get(s.f{i})", f"if {x} is None: raise _Refused"])
        elif check == "decode":
            ns[f"d{i}"] = leaf.decode
            reads.append([f"{x} = d{i}(s.f{i})"])
        else:
            reads.append([f"{x} = s.f{i}"])
    struct = msgspec.defstruct(f"{cls.__name__}Body", fields, tag_field="kind", tag=tag,
                               forbid_unknown_fields=True, gc=False)
    return struct, compile_builder(cls, leaves, reads, ns, "s")


class PayloadDecoder:
    """Payload bytes of one transfer kind → its event, or None where the dict path must decide."""

    def __init__(self, kinds: Sequence[tuple[type, Callable[[Any], Any], int]]) -> None:
        """`kinds`: (Struct, build, number of keys) of each kind this transfer kind carries."""
        structs = tuple(s for s, _, _ in kinds)
        decode = msgspec.msgpack.Decoder(Union[structs] if len(structs) > 1 else structs[0]).decode
        # the map header msgpack writes for each Struct's number of keys: exactly its keys, none twice
        builds = {s: (b, bytes([0x80 | n]) if n <= 15 else b"\xde" + n.to_bytes(2, "big")) for s, b, n in kinds}

        def payload_event(payload: bytes) -> Any:
            try:
                s = decode(payload)
                build, head = builds[s.__class__]
                return build(s) if payload.startswith(head) else None
            except _DecodeErrors:
                return None
        self.decode = payload_event   # what the feed calls (a plain function: one call less than __call__)

    def __call__(self, payload: bytes) -> Any:
        return self.decode(payload)
