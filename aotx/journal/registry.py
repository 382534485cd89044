"""The one codec registry of journalled events: kind tag → class → transfer kind, one generic codec.

Every event is a plain frozen dataclass with a `KIND` tag; its family module registers it here
(`REGISTRY.register(cls, family, transfer)`): aotx/state/codec.py (state and execution events),
aotx/memory/codec.py (memory events). Its body is a msgpack map, keys in this fixed order: `kind`
(the tag), `v` (the kind's encoding version), then the class's fields in declaration order, a
nested dataclass (the operation header) flattened in place; each field is encoded as its
annotation says (aotx.journal.wire). Decoding is strict, within one family: an unknown kind or
version, a missing, extra or mistyped field raises the family's error (EventCodecError,
MemoryCodecError), naming the kind and field. Encoding runs the same checks, so what is written
decodes. Every kind is at version 1; a kind whose fields change gets a new version, and the old
one must stay readable (old records decode forever).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .fast_decode import compile_decoder
from .fast_encode import compile_encoder
from .fields import Refused, Schema, compile_schema
from .struct_decode import PayloadDecoder, compile_struct
from .transfer import WIRE_BUILDERS, pack_body, unpack_body
from .whole import PAYLOAD_DECODERS


@dataclass(frozen=True)


class Family:
    """Events decoded together: `name` starts every refusal's message, `error` is what refuses."""

    name: str
    error: type[Exception]


@dataclass(frozen=True)


class Kind:
    tag: str
    cls: type
    family: Family
    transfer: Optional[int]    # the transfer kind it is journalled as; None: carried inside another event
    version: int
    schema: Schema
    keys: frozenset
    fast: Callable[[dict], Any]   # the generated decoder (aotx.journal.fast_decode); names no fault
    struct: type                  # its body as a msgspec Struct, and the event from one (aotx.journal.struct_decode)
    build: Callable[[Any], Any]
    check: Optional[Callable[[Any], None]]   # a Struct checked as `build` checks it, without building (None: cannot)
    fast_body: Callable[[Any], dict]   # the generated body builder (aotx.journal.fast_encode); names no fault


class Registry:
    """Kind tag → class → transfer kind, and the one encoder/decoder they share."""

    def __init__(self) -> None:
        self._by_tag: dict[str, Kind] = {}
        self._by_cls: dict[type, Kind] = {}

    def register(self, cls: type, family: Family, transfer: Optional[int] = None, version: int = 1) -> Kind:
        tag = getattr(cls, "KIND", None)
        if not isinstance(tag, str) or not tag or tag in self._by_tag:
            raise ValueError(f"{cls.__name__}: KIND {tag!r} is not a new, nonempty tag")
        schema = compile_schema(cls)
        keys = ["kind", "v", *(leaf.key for leaf in schema.leaves)]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{tag}: two fields share a wire key in {keys}")
        kind = Kind(tag, cls, family, transfer, version, schema, frozenset(keys), compile_decoder(cls, schema.leaves),
                    *compile_struct(cls, tag, version, schema.leaves), compile_encoder(tag, version, schema.leaves))
        self._by_tag[tag], self._by_cls[cls] = kind, kind
        return kind

    def kinds(self, family: Optional[Family] = None) -> list[Kind]:
        return [k for k in self._by_tag.values() if family is None or k.family is family]

    def kind_of(self, event: Any) -> Kind:
        kind = self._by_cls.get(type(event))
        if kind is None:
            raise TypeError(f"{type(event).__name__} is not a registered event class")
        return kind

    def transfer_kind(self, event: Any) -> int:
        kind = self.kind_of(event)
        if kind.transfer is None:
            raise TypeError(f"{kind.tag} is not journalled as a transfer of its own")
        return kind.transfer

    def body(self, event: Any) -> dict[str, Any]:
        """The event's msgpack map; a value its field refuses raises the family's error."""
        kind = self.kind_of(event)
        try:
            return kind.fast_body(event)
        except Refused:
            pass   # built again leaf by leaf, to name the field
        body: dict[str, Any] = {"kind": kind.tag, "v": kind.version}
        try:
            for leaf, value in zip(kind.schema.leaves, kind.schema.get(event)):
                body[leaf.key] = leaf.encode(value)
        except Refused as r:
            raise kind.family.error(f"{kind.tag} field {leaf.key!r}: {r}") from None
        return body

    def encode(self, event: Any) -> bytes:
        return pack_body(self.body(event))

    def decode_body(self, body: Any, family: Family, transfer: Optional[int] = None) -> Any:
        """The event of an unpacked body of `family` (and, given `transfer`, of that transfer kind)."""
        error = family.error
        if not isinstance(body, dict):
            raise error(f"{family.name} body must be a map, got {type(body).__name__}")
        tag = body.get("kind")
        kind = self._by_tag.get(tag) if isinstance(tag, str) else None
        if kind is None or kind.family is not family:
            raise error(f"unknown {family.name} kind {tag!r:.60}")
        if transfer is not None and kind.transfer != transfer:
            raise error(f"a {tag} body in a kind {int(transfer)} transfer")
        v = body.get("v")
        if type(v) is not int or v != kind.version:
            raise error(f"{tag}: unknown encoding version {v!r:.20} (this reader knows {kind.version})")
        if len(body) == len(kind.keys):   # kind, v and each leaf's key read there: then they are the keys
            try:
                return kind.fast(body)
            except (KeyError, Refused):
                pass   # checked again key by key and leaf by leaf below, to name the fault
        if body.keys() != kind.keys:
            extra, missing = sorted(set(body) - kind.keys, key=repr), sorted(kind.keys - set(body))
            raise error(f"{tag}: " + (f"unknown field {extra[0]!r:.60}" if extra else f"missing field {missing[0]!r}"))
        values = []
        try:
            for leaf in kind.schema.leaves:
                values.append(leaf.decode(body[leaf.key]))
        except Refused as r:
            raise error(f"{tag} field {leaf.key!r}: {r}") from None
        return kind.schema.make(values)

    def decode(self, payload: bytes, family: Family, transfer: Optional[int] = None) -> Any:
        """The event of msgpack bytes of `family`."""
        try:
            body = unpack_body(payload)
        except (ValueError, TypeError) as exc:  # msgpack: FormatError, ExtraData, StackError, unhashable keys
            raise family.error(f"{family.name} payload is not msgpack: {exc}") from None
        return self.decode_body(body, family, transfer)

    def kind_for(self, cls: type) -> Kind:
        """The registered kind of an event class."""
        return self._by_cls[cls]

    def payload_decoder(self, transfer: int, deferred: frozenset = frozenset()) -> PayloadDecoder:
        """Payload bytes of a `transfer` kind transfer → its event (None: decode it with `decode`); for a
        class in `deferred`, its checked Struct (the event built when read: `defer`)."""
        kinds = [k for k in self._by_tag.values() if k.transfer == transfer]
        if not kinds or len({k.family for k in kinds}) != 1:
            raise ValueError(f"transfer kind {int(transfer)} does not carry the kinds of one family")
        for k in kinds:
            if k.cls in deferred and k.check is None:
                raise ValueError(f"{k.tag}: a leaf is decoded only by building the event; it cannot be deferred")
        return PayloadDecoder([(k.struct, k.build, len(k.keys), k.check if k.cls in deferred else None)
                               for k in kinds])

    def decode_on_read(self, *transfers: int, deferred: tuple[type, ...] = ()) -> None:
        """Have the reassembler's fast path (aotx.journal.whole) decode these transfer kinds' payloads
        straight into their events (Transfer.event), after every kind they carry is registered. A class in
        `deferred` is decoded and checked into its Struct (Transfer.wire), its event built on first read
        of Transfer.event: for a reader that applies the Struct itself (the projector's member changes)."""
        for cls in deferred:
            WIRE_BUILDERS[self._by_cls[cls].struct] = self._by_cls[cls].build
        for transfer in transfers:
            PAYLOAD_DECODERS[int(transfer)] = self.payload_decoder(transfer, frozenset(deferred)).decode

    def decode_as(self, cls: type, body: Any) -> Any:
        """The event of a body that must be a `cls` event."""
        kind = self._by_cls[cls]
        event = self.decode_body(body, kind.family)
        if type(event) is not cls:
            raise kind.family.error(f"expected a {kind.tag} event, got {event.KIND}")
        return event


REGISTRY = Registry()
