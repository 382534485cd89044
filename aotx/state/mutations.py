"""The five mutations of this core, parsed from a JSON body (+ the path's space) and their canonical bytes.

Resolution rules that shape the canonical bytes:
* `scope` defaults to `private`; an omitted `id` (space, conversation) becomes the operation key,
  so `{}` and `{"id": <operation key>, "scope": "private"}` are the same canonical input.
* `id` is the 32-hex id component only; the lineage part of the resource ID is the caller's.
* `permissions` may come in any order but without repeats; canonically ordered read, write, manage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

from .canonical import Envelope, canonical_json, check_fields, parse_counter, parse_envelope
from .errors import IdError, MalformedMutation
from .ids import IdKind, ResourceId, parse_hex16, parse_id
from .vocab import RIGHT_LABELS, MutationKind, Rights, Scope


@dataclass(frozen=True)
class RegisterParticipant:
    envelope: Envelope
    kind = MutationKind.REGISTER

    def body(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class RetireReceipts:
    envelope: Envelope
    retry_floor: int
    kind = MutationKind.RETIRE

    def body(self) -> dict[str, Any]:
        return {"retry_floor": str(self.retry_floor)}


@dataclass(frozen=True)
class CreateSpace:
    envelope: Envelope
    ident: bytes
    scope: Scope = Scope.PRIVATE
    kind = MutationKind.CREATE_SPACE

    def body(self) -> dict[str, Any]:
        return {"id": self.ident.hex(), "scope": self.scope.label}


@dataclass(frozen=True)
class SetMemberRights:
    envelope: Envelope
    space: ResourceId
    participant: ResourceId
    rights: Rights
    kind = MutationKind.SET_MEMBER

    def body(self) -> dict[str, Any]:
        return {"space": str(self.space), "participant": str(self.participant),
                "permissions": Rights(self.rights).labels()}


@dataclass(frozen=True)
class CreateConversation:
    envelope: Envelope
    space: ResourceId
    ident: bytes
    kind = MutationKind.CREATE_CONVERSATION

    def body(self) -> dict[str, Any]:
        return {"space": str(self.space), "id": self.ident.hex()}


Mutation = Union[RegisterParticipant, RetireReceipts, CreateSpace, SetMemberRights, CreateConversation]
_BODY_FIELDS = {
    MutationKind.REGISTER: (), MutationKind.RETIRE: ("retry_floor",),
    MutationKind.CREATE_SPACE: ("id", "scope"), MutationKind.SET_MEMBER: ("participant", "permissions"),
    MutationKind.CREATE_CONVERSATION: ("id",),
}
_PATH_SPACE = (MutationKind.SET_MEMBER, MutationKind.CREATE_CONVERSATION)


def canonical_bytes(mutation: Mutation) -> bytes:
    """The complete canonical operation bytes the runtime compares for retries."""
    fields = mutation.envelope.fields()
    fields["mutation"] = mutation.kind.label
    fields.update(mutation.body())
    return canonical_json(fields)


def _ident(body: Mapping[str, Any], env: Envelope) -> bytes:
    if "id" not in body:
        return env.operation_key
    try:
        return parse_hex16(body["id"], "id")
    except IdError as exc:
        raise MalformedMutation(str(exc)) from None


def _resource(text: object, kind: IdKind) -> ResourceId:
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
    if len(set(value)) != len(value):
        raise MalformedMutation("permissions must not repeat an entry")
    return Rights.from_labels(value)


def parse_mutation(kind: MutationKind, body: Mapping[str, Any], space: str | None = None) -> Mutation:
    """Validate a JSON body (and the route's `{space}`) into a mutation; MalformedMutation → 400."""
    kind = MutationKind(kind)
    check_fields(body, _BODY_FIELDS[kind], kind.label)
    if (space is not None) != (kind in _PATH_SPACE):
        raise MalformedMutation(f"{kind.label}: the route's space is {'required' if space is None else 'not used'}")
    env = parse_envelope(body)
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
    return CreateConversation(env, space_id, _ident(body, env))
