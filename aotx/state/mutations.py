"""The five mutations of this core, parsed from a JSON body (+ the path's space) and their canonical bytes.

Resolution rules that shape the canonical bytes:
* `scope` defaults to `private`; an omitted `id` (space, conversation) becomes the operation key,
  so `{}` and `{"id": <operation key>, "scope": "private"}` are the same canonical input.
* `id` is the 32-hex id component only; the lineage part of the resource ID is the caller's.
* `permissions` may come in any order but without repeats; canonically ordered read, write, manage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import permutations
import re
from typing import Any, Mapping, Optional, Union

from .canonical import SCHEMA, Envelope, canonical_json, check_fields, parse_counter, parse_envelope
from .body_numbers import bounded_int as _int_field, bounded_number as _number
from .errors import IdError, MalformedMutation
from .ids import IdKind, ResourceId, parse_hex16, parse_id
from .vocab import RIGHT_LABELS, MutationKind, Rights, Scope


@dataclass(frozen=True)
class RegisterParticipant:
    envelope: Envelope
    kind = MutationKind.REGISTER

    def body(self) -> dict[str, Any]:
        return {}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"lineage":"{e.lineage.hex()}","mutation":"participant.register","operation_key":'
                f'"{e.operation_key.hex()}","schema":"{SCHEMA}","sequence":"{e.sequence}"}}').encode()


@dataclass(frozen=True)
class RetireReceipts:
    envelope: Envelope
    retry_floor: int
    kind = MutationKind.RETIRE

    def body(self) -> dict[str, Any]:
        return {"retry_floor": str(self.retry_floor)}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"lineage":"{e.lineage.hex()}","mutation":"participant.retire","operation_key":'
                f'"{e.operation_key.hex()}","retry_floor":"{self.retry_floor}","schema":"{SCHEMA}",'
                f'"sequence":"{e.sequence}"}}').encode()


@dataclass(frozen=True)
class CreateSpace:
    envelope: Envelope
    ident: bytes
    scope: Scope = Scope.PRIVATE
    kind = MutationKind.CREATE_SPACE

    def body(self) -> dict[str, Any]:
        return {"id": self.ident.hex(), "scope": self.scope.label}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"id":"{self.ident.hex()}","lineage":"{e.lineage.hex()}","mutation":"space.create",'
                f'"operation_key":"{e.operation_key.hex()}","schema":"{SCHEMA}","scope":"{self.scope.label}",'
                f'"sequence":"{e.sequence}"}}').encode()


@dataclass(frozen=True)
class SetMemberRights:
    envelope: Envelope
    space: ResourceId
    participant: ResourceId
    rights: Rights
    kind = MutationKind.SET_MEMBER

    def body(self) -> dict[str, Any]:
        return {"space": _text(self.space), "participant": _text(self.participant),
                "permissions": list(_LABELS_OF[int(self.rights)])}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"lineage":"{e.lineage.hex()}","mutation":"space.members.set","operation_key":'
                f'"{e.operation_key.hex()}","participant":"{_text(self.participant)}","permissions":'
                f'{_PERMISSIONS_JSON[int(self.rights)]},"schema":"{SCHEMA}","sequence":"{e.sequence}",'
                f'"space":"{_text(self.space)}"}}').encode()


@dataclass(frozen=True)
class CreateConversation:
    envelope: Envelope
    space: ResourceId
    ident: bytes
    kind = MutationKind.CREATE_CONVERSATION

    def body(self) -> dict[str, Any]:
        return {"space": str(self.space), "id": self.ident.hex()}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"id":"{self.ident.hex()}","lineage":"{e.lineage.hex()}","mutation":"conversation.create",'
                f'"operation_key":"{e.operation_key.hex()}","schema":"{SCHEMA}","sequence":"{e.sequence}",'
                f'"space":"{_text(self.space)}"}}').encode()


# the input limits and media syntax, here and for aotx.memory (which builds on this package)
MAX_INPUT_BYTES = 2048       # text plus device-added media links, UTF-8 bytes
MEDIA_LINK_BYTES = 73        # per media link, its separator included
MAX_MEDIA = 8
MEDIA_TYPES = ("image", "audio")
MAX_OUTPUT_TOKENS_DEFAULT = 256
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# the device's media link syntax (aotx.memory.payload.media_link: "\n[image:<sha256>]"); text holding
# one could pass for a device-added link in the retained payload, so it is refused before retention
MEDIA_CONTROL = re.compile(r"\[(?:image|audio):[0-9a-f]{64}\]")


@dataclass(frozen=True)
class MediaRef:
    type: str                # image | audio
    sha256: str              # 64 lowercase hex

    def json(self) -> dict[str, str]:
        return {"type": self.type, "sha256": self.sha256}


@dataclass(frozen=True)
class SubmitInput:
    """An input to a conversation. `pages` None = the page grant at admission (the effective page
    limit is recorded in the admission, apart from these caller bytes). `temperature` / `top_p`
    None = absent: the served model's default sampling at execution (aotx.sampling_defaults), kept
    apart from an explicit value in the canonical bytes (`null`). Revision 1 resolved an absent
    field to 0.0 / 1.0 in the bytes; `legacy_bytes` is that form (decide: an exact retry of an input
    journalled then)."""

    envelope: Envelope
    conversation: ResourceId
    text: str
    model: str
    max_output_tokens: int = MAX_OUTPUT_TOKENS_DEFAULT
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    pages: Optional[int] = None
    media: tuple[MediaRef, ...] = ()
    kind = MutationKind.INPUT

    def body(self) -> dict[str, Any]:
        return {"conversation": str(self.conversation), "text": self.text, "model": self.model,
                "max_output_tokens": self.max_output_tokens, "temperature": self.temperature,
                "top_p": self.top_p, "pages": self.pages, "media": [m.json() for m in self.media]}


@dataclass(frozen=True)
class CancelInput:
    envelope: Envelope
    conversation: ResourceId
    target_sequence: int
    kind = MutationKind.CANCEL

    def body(self) -> dict[str, Any]:
        return {"conversation": str(self.conversation), "target_sequence": str(self.target_sequence)}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"conversation":"{_text(self.conversation)}","lineage":"{e.lineage.hex()}",'
                f'"mutation":"conversation.cancel","operation_key":"{e.operation_key.hex()}","schema":"{SCHEMA}",'
                f'"sequence":"{e.sequence}","target_sequence":"{self.target_sequence}"}}').encode()


@dataclass(frozen=True)
class PublishMemory:
    """Publish a retained text memory (`object`, at its current `source_version`) into `space`."""

    envelope: Envelope
    space: ResourceId
    object: bytes            # 16: the text memory object
    source_version: int
    kind = MutationKind.PUBLISH

    def body(self) -> dict[str, Any]:
        return {"space": str(self.space), "object": self.object.hex(), "source_version": str(self.source_version)}

    def canonical(self) -> bytes:
        e = self.envelope
        return (f'{{"lineage":"{e.lineage.hex()}","mutation":"space.publish","object":"{self.object.hex()}",'
                f'"operation_key":"{e.operation_key.hex()}","schema":"{SCHEMA}","sequence":"{e.sequence}",'
                f'"source_version":"{self.source_version}","space":"{_text(self.space)}"}}').encode()


Mutation = Union[RegisterParticipant, RetireReceipts, CreateSpace, SetMemberRights, CreateConversation,
                 SubmitInput, CancelInput, PublishMemory]
_BODY_FIELDS = {
    MutationKind.REGISTER: (), MutationKind.RETIRE: ("retry_floor",),
    MutationKind.CREATE_SPACE: ("id", "scope"), MutationKind.SET_MEMBER: ("participant", "permissions"),
    MutationKind.CREATE_CONVERSATION: ("id",),
    MutationKind.INPUT: ("text", "model", "max_output_tokens", "temperature", "top_p", "pages", "media"),
    MutationKind.CANCEL: ("target_sequence",),
    MutationKind.PUBLISH: ("object", "source_version"),
}
_PATH_SPACE = (MutationKind.SET_MEMBER, MutationKind.CREATE_CONVERSATION, MutationKind.PUBLISH)
_PATH_CONVERSATION = (MutationKind.INPUT, MutationKind.CANCEL)
_PATH_RESOURCE = _PATH_SPACE + _PATH_CONVERSATION   # kinds whose route names a space or conversation


# the labels of each rights value (Rights.labels: Flag arithmetic per call, ~3 µs), and the rights of
# each valid permissions array in any order (Rights.from_labels), computed once
_LABELS_OF = {int(r): tuple(Rights(r).labels()) for r in range(int(Rights.ALL) + 1)}
_RIGHTS_OF = {order: Rights.from_labels(order) for n in range(len(RIGHT_LABELS) + 1)
              for order in permutations(RIGHT_LABELS, n)}
_PERMISSIONS_JSON = {r: "[" + ",".join(f'"{label}"' for label in labels) + "]" for r, labels in _LABELS_OF.items()}


def _text(rid: ResourceId) -> str:
    """str(rid) (ids.format_id; a ResourceId's parts are 16 bytes by construction)."""
    return f"{rid.kind._value_}-{rid.lineage.hex()}-{rid.ident.hex()}"


def canonical_bytes(mutation: Mutation) -> bytes:
    """The complete canonical operation bytes the runtime compares for retries."""
    if mutation.kind is not MutationKind.INPUT:
        # every field of a mutation but an input's is a hex, ID, label or decimal string (or a list of
        # labels), which JSON writes as it is: its class writes the sorted fields in one f-string (tested
        # byte for byte against canonical_json of envelope.fields() + kind + body(), every kind)
        return mutation.canonical()
    fields = mutation.envelope.fields()   # an input's text, model and numbers go through json
    fields["mutation"] = mutation.kind.label
    fields.update(mutation.body())
    return canonical_json(fields)


# revision 1 of the input's bytes: an absent temperature / top_p was written as these values
LEGACY_TEMPERATURE, LEGACY_TOP_P = 0.0, 1.0


def legacy_bytes(mutation: Mutation) -> Optional[bytes]:
    """The revision-1 canonical bytes of an input that leaves temperature or top_p absent (None
    otherwise: its bytes are the same in both revisions)."""
    if not isinstance(mutation, SubmitInput) or (mutation.temperature is not None and mutation.top_p is not None):
        return None
    return canonical_bytes(replace(
        mutation, temperature=LEGACY_TEMPERATURE if mutation.temperature is None else mutation.temperature,
        top_p=LEGACY_TOP_P if mutation.top_p is None else mutation.top_p))


def _ident(body: Mapping[str, Any], env: Envelope) -> bytes:
    if "id" not in body:
        return env.operation_key
    try:
        return parse_hex16(body["id"], "id")
    except IdError as exc:
        raise MalformedMutation(str(exc)) from None


# by the kind's value: an Enum member's own hash is a Python-level call (~0.5 µs)
_ID_FORM = {kind.value: re.compile(kind.value + r"-([0-9a-f]{32})-([0-9a-f]{32})") for kind in IdKind}


# valid IDs parsed already, per kind (a ResourceId is immutable: shared): the same spaces, conversations and
# participants come again and again; bounded, since any caller may send any valid ID
_PARSED: dict[str, dict[str, ResourceId]] = {kind.value: {} for kind in IdKind}
MAX_PARSED = 4096


def _resource(text: object, kind: IdKind) -> ResourceId:
    if type(text) is str:   # the valid form at once; ids.parse_id names what is wrong with any other
        parsed = _PARSED[kind._value_]
        rid = parsed.get(text)
        if rid is not None:
            return rid
        valid = _ID_FORM[kind._value_].fullmatch(text)
        if valid:
            if len(parsed) >= MAX_PARSED:
                parsed.clear()
            rid = parsed[text] = ResourceId(kind, bytes.fromhex(valid[1]), bytes.fromhex(valid[2]))
            return rid
    try:
        return parse_id(text, kind)
    except IdError as exc:
        raise MalformedMutation(str(exc)) from None


def _rights(value: object) -> Rights:
    if not isinstance(value, list):
        raise MalformedMutation(f"permissions must be an array, got {type(value).__name__}")
    for item in value:
        if item not in RIGHT_LABELS:
            raise MalformedMutation(f"permissions may contain only read, write, manage; got {item!r}")
    rights = _RIGHTS_OF.get(tuple(value))
    if rights is None:   # (every array of distinct labels is in the table)
        raise MalformedMutation("permissions must not repeat an entry")
    return rights


def _media(value: object) -> tuple[MediaRef, ...]:
    if not isinstance(value, list):
        raise MalformedMutation(f"media must be an array, got {type(value).__name__}")
    if len(value) > MAX_MEDIA:
        raise MalformedMutation(f"media accepts at most {MAX_MEDIA} references, got {len(value)}")
    out = []
    for i, row in enumerate(value):
        if not isinstance(row, dict) or set(row) != {"type", "sha256"}:
            raise MalformedMutation(f"media[{i}] must be an object with exactly type and sha256")
        if row["type"] not in MEDIA_TYPES:
            raise MalformedMutation(f"media[{i}].type must be image or audio, got {row['type']!r}")
        if not isinstance(row["sha256"], str) or not SHA256_HEX.fullmatch(row["sha256"]):
            raise MalformedMutation(f"media[{i}].sha256 must be 64 lowercase hex digits")
        out.append(MediaRef(row["type"], row["sha256"]))
    return tuple(out)


def _parse_input(env: Envelope, con: ResourceId, body: Mapping[str, Any]) -> SubmitInput:
    for name in ("text", "model"):
        if name not in body:
            raise MalformedMutation(f"conversation.input: missing field {name!r}")
    text, model = body["text"], body["model"]
    if not isinstance(text, str):
        raise MalformedMutation(f"text must be a string, got {type(text).__name__}")
    if not isinstance(model, str) or not model:
        raise MalformedMutation("model must be a nonempty string")
    for name, value in (("text", text), ("model", model)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedMutation(f"{name} is not valid Unicode: a lone surrogate at character {exc.start}") from None
    control = MEDIA_CONTROL.search(text)
    if control:
        raise MalformedMutation(f"text contains the reserved media control token {control.group(0)[:8]}…] at "
                                f"character {control.start()}; media references go in the media field")
    media = _media(body.get("media", []))
    if not text and not media:
        raise MalformedMutation("text may be empty only when media is present")
    size = len(text.encode("utf-8")) + MEDIA_LINK_BYTES * len(media)
    if size > MAX_INPUT_BYTES:
        raise MalformedMutation(f"text ({len(text.encode('utf-8'))} UTF-8 bytes) plus {len(media)} media links "
                                f"({MEDIA_LINK_BYTES} bytes each) is {size} bytes; the limit is {MAX_INPUT_BYTES}")
    return SubmitInput(env, con, text, model,
                       max_output_tokens=_int_field(body, "max_output_tokens", MAX_OUTPUT_TOKENS_DEFAULT, 1, 1 << 20),
                       temperature=_number(body, "temperature", None, 0.0, 2.0, open_low=False),
                       top_p=_number(body, "top_p", None, 0.0, 1.0, open_low=True),
                       pages=_int_field(body, "pages", None, 1, 0xFFFFFFFF), media=media)


def parse_mutation(kind: MutationKind, body: Mapping[str, Any], space: str | None = None) -> Mutation:
    """Validate a JSON body (and the route's `{space}`, or `{con}` for inputs and cancellations)
    into a mutation; MalformedMutation → 400."""
    kind = kind if type(kind) is MutationKind else MutationKind(kind)
    check_fields(body, _BODY_FIELDS[kind], kind.label)
    if (space is not None) != (kind in _PATH_RESOURCE):
        raise MalformedMutation(f"{kind.label}: the route's {'conversation' if kind in _PATH_CONVERSATION else 'space'}"
                                f" is {'required' if space is None else 'not used'}")
    env = parse_envelope(body)
    if kind in _PATH_CONVERSATION:
        con = _resource(space, IdKind.CONVERSATION)
        if kind is MutationKind.INPUT:
            return _parse_input(env, con, body)
        if "target_sequence" not in body:
            raise MalformedMutation("conversation.cancel: missing field 'target_sequence'")
        return CancelInput(env, con, parse_counter(body["target_sequence"], "target_sequence"))
    if kind is MutationKind.REGISTER:
        return RegisterParticipant(env)
    if kind is MutationKind.RETIRE:
        if "retry_floor" not in body:
            raise MalformedMutation("participant.retire: missing field 'retry_floor'")
        return RetireReceipts(env, parse_counter(body["retry_floor"], "retry_floor"))
    if kind is MutationKind.CREATE_SPACE:
        scope = body.get("scope", "private")
        if not isinstance(scope, str) or scope not in ("private", "room", "instance"):
            raise MalformedMutation(f"scope must be private, room or instance, got {scope!r}")
        return CreateSpace(env, _ident(body, env), Scope.from_label(scope))
    space_id = _resource(space, IdKind.SPACE)
    if kind is MutationKind.SET_MEMBER:
        for name in ("participant", "permissions"):
            if name not in body:
                raise MalformedMutation(f"space.members.set: missing field {name!r}")
        return SetMemberRights(env, space_id, _resource(body["participant"], IdKind.PARTICIPANT),
                               _rights(body["permissions"]))
    if kind is MutationKind.PUBLISH:
        for name in ("object", "source_version"):
            if name not in body:
                raise MalformedMutation(f"space.publish: missing field {name!r}")
        try:
            obj = parse_hex16(body["object"], "object")
        except IdError as exc:
            raise MalformedMutation(str(exc)) from None
        return PublishMemory(env, space_id, obj, parse_counter(body["source_version"], "source_version"))
    return CreateConversation(env, space_id, _ident(body, env))
