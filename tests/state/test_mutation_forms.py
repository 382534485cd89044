"""A parsed mutation's other forms round-trip: the request body a gateway forwards, and the stored
canonical bytes an executor reads after a read-back."""

from __future__ import annotations

import pytest

from aotx.state import MalformedMutation, MutationKind, canonical_bytes, canonical_json, lineage_for, parse_mutation
from aotx.state.mutation_forms import from_canonical, request_body

from .helpers import body

M = MutationKind
SPC = f"spc-{lineage_for('alice').hex()}-{2:032x}"
CON = f"con-{lineage_for('alice').hex()}-{3:032x}"
PAR = f"par-{lineage_for('bob').hex()}-{1:032x}"
SHA = "ab" * 32
CASES = [
    (M.REGISTER, None, {}),
    (M.RETIRE, None, {"retry_floor": "3"}),
    (M.CREATE_SPACE, None, {}),
    (M.CREATE_SPACE, None, {"id": f"{9:032x}", "scope": "room"}),
    (M.SET_MEMBER, SPC, {"participant": PAR, "permissions": ["write", "read"]}),
    (M.SET_MEMBER, SPC, {"participant": PAR, "permissions": []}),
    (M.SET_MEMBER, SPC, {"participant": PAR, "permissions": ["manage", "read", "write"]}),
    (M.SET_MEMBER, SPC, {"participant": PAR, "permissions": ["manage"]}),
    (M.CREATE_CONVERSATION, SPC, {}),
    (M.INPUT, CON, {"text": "héllo", "model": "m"}),
    (M.INPUT, CON, {"text": "", "model": "m", "max_output_tokens": 7, "temperature": 1, "top_p": 0.5, "pages": 3,
                    "media": [{"type": "image", "sha256": SHA}]}),
    (M.CANCEL, CON, {"target_sequence": "4"}),
    (M.PUBLISH, SPC, {"object": f"{5:032x}", "source_version": "2"}),
]


@pytest.mark.parametrize("kind, resource, fields", CASES)
def test_request_body_and_canonical_bytes_parse_back_to_the_same_mutation(kind, resource, fields):
    m = parse_mutation(kind, body("alice", 5, 5, **fields), resource)
    again_body, again_resource = request_body(m)
    assert again_resource == resource
    assert parse_mutation(kind, again_body, again_resource) == m
    assert from_canonical(canonical_bytes(m)) == m


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"schema": 1}', b'{"mutation": "no.such"}',
                                 b'{"mutation": "space.create"}'])
def test_bytes_that_are_no_mutations_canonical_form_are_refused(raw):
    with pytest.raises(MalformedMutation):
        from_canonical(raw)


@pytest.mark.parametrize("kind, resource, fields", CASES)
def test_canonical_bytes_are_the_json_encoders(kind, resource, fields):
    """Every kind but an input writes its canonical bytes without json (its class's `canonical`, one
    f-string): byte for byte what canonical_json (json.dumps, sorted keys) writes of the same fields."""
    m = parse_mutation(kind, body("alice", 5, 5, **fields), resource)
    resolved = {**m.envelope.fields(), "mutation": m.kind.label, **m.body()}
    assert canonical_bytes(m) == canonical_json(resolved)
    if kind is not M.INPUT:
        assert m.canonical() == canonical_json(resolved)
