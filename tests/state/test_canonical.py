import pytest

from aotx.state import (SCHEMA, CreateSpace, MalformedMutation, MutationKind, Rights, Scope, canonical_bytes,
                        parse_json_body, parse_mutation)

L = "0123456789abcdef0123456789abcdef"
K = "123456789abcdef0123456789abcdef0"
SPACE = f"spc-{L}-{K}"
PAR = f"par-{L}-{'ab' * 16}"


def env(**extra):
    return {"schema": SCHEMA, "lineage": L, "operation_key": K, "sequence": "1", **extra}


def test_golden_canonical_bytes_of_a_space_post():
    m = parse_mutation(MutationKind.CREATE_SPACE, env(scope="room"))
    assert canonical_bytes(m) == (
        b'{"id":"123456789abcdef0123456789abcdef0","lineage":"0123456789abcdef0123456789abcdef",'
        b'"mutation":"space.create","operation_key":"123456789abcdef0123456789abcdef0",'
        b'"schema":"aotx.shared.mutation.v1","scope":"room","sequence":"1"}')


def test_golden_canonical_bytes_of_a_publication():
    m = parse_mutation(MutationKind.PUBLISH, env(object="ab" * 16, source_version="1", sequence="7"), SPACE)
    assert (m.object, m.source_version) == (bytes([0xab] * 16), 1)
    assert canonical_bytes(m) == (
        b'{"lineage":"0123456789abcdef0123456789abcdef","mutation":"space.publish",'
        b'"object":"abababababababababababababababab","operation_key":"123456789abcdef0123456789abcdef0",'
        b'"schema":"aotx.shared.mutation.v1","sequence":"7","source_version":"1",'
        b'"space":"spc-0123456789abcdef0123456789abcdef-123456789abcdef0123456789abcdef0"}')


def test_defaults_resolve_to_the_same_canonical_input():
    a = parse_mutation(MutationKind.CREATE_SPACE, env())
    b = parse_mutation(MutationKind.CREATE_SPACE, env(id=K, scope="private"))
    assert isinstance(a, CreateSpace) and a.scope is Scope.PRIVATE and a.ident == bytes.fromhex(K)
    assert canonical_bytes(a) == canonical_bytes(b)
    assert canonical_bytes(a) != canonical_bytes(parse_mutation(MutationKind.CREATE_SPACE, env(scope="instance")))


def test_path_space_is_part_of_the_canonical_bytes():
    one = parse_mutation(MutationKind.CREATE_CONVERSATION, env(), SPACE)
    other = parse_mutation(MutationKind.CREATE_CONVERSATION, env(), f"spc-{L}-{'0' * 31}1")
    assert canonical_bytes(one) != canonical_bytes(other)


def test_permissions_any_order_canonical_order():
    a = parse_mutation(MutationKind.SET_MEMBER, env(participant=PAR, permissions=["manage", "read"]), SPACE)
    b = parse_mutation(MutationKind.SET_MEMBER, env(participant=PAR, permissions=["read", "manage"]), SPACE)
    assert a.rights == Rights.READ | Rights.MANAGE and canonical_bytes(a) == canonical_bytes(b)
    assert b'"permissions":["read","manage"]' in canonical_bytes(a)
    empty = parse_mutation(MutationKind.SET_MEMBER, env(participant=PAR, permissions=[]), SPACE)
    assert empty.rights == Rights.NONE


def test_non_ascii_is_utf8_not_escaped():
    assert "é".encode() in __import__("aotx.state", fromlist=["canonical_json"]).canonical_json({"x": "é"})


@pytest.mark.parametrize("kind, body, space, message", [
    (MutationKind.REGISTER, env(extra=1), None, "unknown field 'extra'"),
    (MutationKind.REGISTER, {k: v for k, v in env().items() if k != "sequence"}, None, "missing envelope field 'sequence'"),
    (MutationKind.REGISTER, env(schema="v0"), None, "schema must be"),
    (MutationKind.REGISTER, env(sequence="01"), None, "not a canonical decimal string"),
    (MutationKind.REGISTER, env(sequence="+1"), None, "not a canonical decimal string"),
    (MutationKind.REGISTER, env(sequence=" 1"), None, "not a canonical decimal string"),
    (MutationKind.REGISTER, env(sequence=1), None, "sequence must be a decimal string, got int"),
    (MutationKind.REGISTER, env(sequence="0"), None, "outside 1.."),
    (MutationKind.REGISTER, env(sequence=str(1 << 64)), None, "outside 1.."),
    (MutationKind.REGISTER, env(operation_key="0" * 32), None, "operation_key must be nonzero"),
    (MutationKind.REGISTER, env(operation_key=K.upper()), None, "lowercase"),
    (MutationKind.REGISTER, env(lineage=L[:30]), None, "lineage must be 32 lowercase hex digits"),
    (MutationKind.CREATE_SPACE, env(scope="public"), None, "scope must be private, room or instance"),
    (MutationKind.CREATE_SPACE, env(id=SPACE), None, "id must be 32 lowercase hex digits"),
    (MutationKind.CREATE_SPACE, env(), SPACE, "the route's space is not used"),
    (MutationKind.CREATE_CONVERSATION, env(), None, "the route's space is required"),
    (MutationKind.CREATE_CONVERSATION, env(), f"con-{L}-{K}", "must start with 'spc'"),
    (MutationKind.SET_MEMBER, env(permissions=[]), SPACE, "missing field 'participant'"),
    (MutationKind.SET_MEMBER, env(participant=PAR, permissions=["read", "read"]), SPACE, "must not repeat"),
    (MutationKind.SET_MEMBER, env(participant=PAR, permissions=["admin"]), SPACE, "only read, write, manage"),
    (MutationKind.SET_MEMBER, env(participant=PAR, permissions="read"), SPACE, "must be an array"),
    (MutationKind.SET_MEMBER, env(participant=SPACE, permissions=[]), SPACE, "must start with 'par'"),
    (MutationKind.RETIRE, env(), None, "missing field 'retry_floor'"),
    (MutationKind.RETIRE, env(retry_floor="1.0"), None, "retry_floor '1.0' is not a canonical"),
    (MutationKind.PUBLISH, env(source_version="1"), SPACE, "missing field 'object'"),
    (MutationKind.PUBLISH, env(object="ab" * 16), SPACE, "missing field 'source_version'"),
    (MutationKind.PUBLISH, env(object="AB" * 16, source_version="1"), SPACE, "lowercase"),
    (MutationKind.PUBLISH, env(object="ab" * 16, source_version=1), SPACE, "must be a decimal string"),
    (MutationKind.PUBLISH, env(object="ab" * 16, source_version="0"), SPACE, "source_version 0 is outside 1"),
    (MutationKind.PUBLISH, env(object="ab" * 16, source_version="1"), None, "the route's space is required"),
    (MutationKind.PUBLISH, env(object="ab" * 16, source_version="1", text="x"), SPACE, "unknown field"),
])
def test_malformed_mutations(kind, body, space, message):
    with pytest.raises(MalformedMutation, match=message.replace("+", r"\+").replace("(", r"\(").replace(".", r"\.")):
        parse_mutation(kind, body, space)


@pytest.mark.parametrize("raw, message", [
    (b'{"a": 1, "a": 2}', "field 'a' appears twice"),
    (b'{"a": "\xff"}', "not valid UTF-8 at byte 7"),
    (b'[1]', "must be a JSON object"),
    (b'{"a": NaN}', "NaN is not valid JSON"),
    (b'{"a": ', "body is not JSON"),
])
def test_json_body_is_strict(raw, message):
    with pytest.raises(MalformedMutation, match=message):
        parse_json_body(raw)


def test_json_body_ok():
    assert parse_json_body('{"a": "é"}'.encode()) == {"a": "é"}


@pytest.mark.parametrize("lineage, key, seq", [("00" * 16, "01" * 16, "1"), ("ab" * 16, "ff" * 16, str((1 << 64) - 1))])
def test_parsed_envelope_is_the_checked_dataclass(lineage, key, seq):
    """parse_envelope sets the frozen fields it checked directly: the same value, hash and repr as Envelope(...)."""
    from aotx.state.canonical import Envelope, parse_envelope
    env = parse_envelope({"schema": SCHEMA, "lineage": lineage, "operation_key": key, "sequence": seq})
    made = Envelope(bytes.fromhex(lineage), bytes.fromhex(key), int(seq))
    assert env == made and hash(env) == hash(made) and repr(env) == repr(made) and type(env) is Envelope
    with pytest.raises(AttributeError):
        env.sequence = 2


def test_decided_op_header_is_the_dataclass():
    """decide sets the OpHeader's frozen fields directly: the same value, hash and repr as OpHeader(...)."""
    from aotx.state.decide import _op_header
    from aotx.state.events import OpHeader
    parts = (b"l" * 16, 7, b"o" * 16, b"k" * 16, b'{"x":1}')
    header, made = _op_header(*parts), OpHeader(*parts)
    assert header == made and hash(header) == hash(made) and repr(header) == repr(made) and type(header) is OpHeader
