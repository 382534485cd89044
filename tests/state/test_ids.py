import pytest

from aotx.state import IdError, IdKind, ResourceId, format_id, parse_hex16, parse_id

L = "0123456789abcdef0123456789abcdef"
I = "fedcba9876543210fedcba9876543210"


@pytest.mark.parametrize("kind", list(IdKind))
def test_round_trip_every_prefix(kind):
    text = f"{kind.value}-{L}-{I}"
    rid = parse_id(text, kind)
    assert rid == ResourceId(kind, bytes.fromhex(L), bytes.fromhex(I))
    assert str(rid) == text == format_id(kind, rid.lineage, rid.ident)


@pytest.mark.parametrize("text, message", [
    (f"con-{L}-{I}", "must start with 'spc', not 'con'"),
    (f"spc-{L}", "must have the form spc-<32 hex>-<32 hex>"),
    (f"spc-{L}-{I}-00", "must have the form"),
    (f"spc-{L.upper()}-{I}", "space ID lineage must use lowercase hex digits"),
    (f"spc-{L}-{I[:-1]}", "space ID id must be 32 lowercase hex digits, got 31 characters"),
    (f"spc-{L}-{I[:-1]}g", "space ID id contains a character that is not a hex digit"),
    (f"SPC-{L}-{I}", "must start with 'spc'"),
    (42, "space ID must be a string, got int"),
])
def test_precise_errors(text, message):
    with pytest.raises(IdError, match=message.replace("<", ".").replace(">", ".")):
        parse_id(text, IdKind.SPACE)


def test_hex16_nonzero_and_types():
    assert parse_hex16("00" * 16, "lineage") == bytes(16)
    with pytest.raises(IdError, match="operation_key must be nonzero"):
        parse_hex16("00" * 16, "operation_key", nonzero=True)
    with pytest.raises(IdError, match="got bytes"):
        parse_hex16(b"00" * 16, "lineage")
    with pytest.raises(IdError, match="16 bytes each"):
        format_id(IdKind.OPERATION, b"x", bytes(16))
