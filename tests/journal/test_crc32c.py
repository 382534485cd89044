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


def test_compiled_agrees_with_the_reference_on_random_data():
    import importlib
    import random

    mod = importlib.import_module("aotx.journal.crc32c")
    rng = random.Random(37)
    for n in list(range(0, 40)) + [159, 160, 161, 1000, 4096]:
        data = rng.randbytes(n)
        start = rng.getrandbits(32)
        want = mod.crc32c_reference(data)
        assert mod.crc32c(data) == want and mod.crc32c_bytes(data) == want
        assert mod.crc32c(bytearray(data)) == want and mod.crc32c(memoryview(data)) == want
        assert mod.crc32c(data, start) == mod.crc32c_reference(data, start)
        cut = n // 3
        assert mod.crc32c(data[cut:], mod.crc32c(data[:cut])) == want


def test_the_compiled_implementation_is_in_use():
    import importlib
    import importlib.util

    mod = importlib.import_module("aotx.journal.crc32c")
    if importlib.util.find_spec("google_crc32c") is not None:
        import google_crc32c
        if google_crc32c.implementation == "c":
            assert mod.IMPLEMENTATION == "google-crc32c"
    assert mod.IMPLEMENTATION in ("google-crc32c", "python")
