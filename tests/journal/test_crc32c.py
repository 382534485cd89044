"""crc32c against published vectors (iSCSI, RFC 3720 B.4)."""

from aotx.journal import crc32c
from aotx.journal.crc32c import TABLE


def test_check_value():
    assert crc32c(b"123456789") == 0xE3069283


def test_rfc3720_vectors():
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


def test_empty_incremental_and_table():
    assert crc32c(b"") == 0
    assert crc32c(b"56789", crc32c(b"1234")) == 0xE3069283
    assert len(TABLE) == 256 and TABLE[1] == 0xF26B8303
