"""A parsed mutation's other forms: a request body that parses back to it, and back from canonical bytes.

A mutation is parsed once at the edge of a process (`parse_mutation`); where it must cross to
another process (gateway → runtime over NATS) it travels as `request_body` (the envelope and the
resolved fields, with the route's resource apart, as a client would POST it) and is parsed once
there. The stored canonical bytes of an operation are the source of truth after a restart or a
read-back: `from_canonical` gives the mutation back. Both round-trip: parse_mutation(kind,
*request_body(m)) == m and from_canonical(canonical_bytes(m)) == m.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import MalformedMutation
from .mutations import _PATH_CONVERSATION, _PATH_SPACE, Mutation, parse_mutation
from .vocab import MutationKind


def _path_key(kind: MutationKind) -> str | None:
    if kind in _PATH_SPACE:
        return "space"
    if kind in _PATH_CONVERSATION:
        return "conversation"
    return None


def request_body(mutation: Mutation) -> tuple[dict[str, Any], str | None]:
    """(body, route resource): what parse_mutation(mutation.kind, body, resource) turns back into `mutation`."""
    fields: dict[str, Any] = mutation.envelope.fields()
    fields.update(mutation.body())
    key = _path_key(mutation.kind)
    return fields, None if key is None else fields.pop(key)


def from_canonical(canonical: bytes) -> Mutation:
    """The mutation whose canonical bytes these are (MalformedMutation: they are not)."""
    try:
        fields = json.loads(canonical)
        kind = MutationKind.from_label(fields.pop("mutation"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, not an object, no known kind
        raise MalformedMutation(f"not the canonical bytes of a mutation: {exc}") from None
    key = _path_key(kind)
    return parse_mutation(kind, fields, None if key is None else fields.pop(key, None))
