import pytest


@pytest.fixture(scope="module")
def tok(bundle):
    return bundle.tokenizer


@pytest.mark.parametrize("text", [
    "Hello, world! The quick brown fox.",
    "日本語のテキストと中文",
    "emoji 🤗👍🏽 and flags 🇫🇷",
    "tabs\tand\t\tnewlines\n\n  indented\r\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "digits 1234567890 and 3.14159",
    "",
])
def test_round_trip(tok, text):
    ids = tok.encode(text)
    assert all(isinstance(i, int) for i in ids)
    assert tok.decode(ids) == text
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode("utf-8")


def test_specials_are_single_ids(tok):
    assert tok.encode("<|im_start|>") == [1]
    assert tok.encode("<|im_end|>") == [2]
    assert tok.encode("<|im_start|>user") == [1, 4093]
    assert tok.is_special(1) and tok.is_special(2) and not tok.is_special(4093)
    assert tok.bos_id == 1 and tok.eos_id == 2 and tok.vocab_size == 49152
    assert tok.token_bytes(2) == b"<|im_end|>" and tok.token_text(2) == "<|im_end|>"
    assert tok.decode([1, 4093, 2], skip_special=True) == "user"


def test_digits_split_individually(tok):
    ids = tok.encode("12345")
    assert len(ids) == 5
    assert [tok.token_text(i) for i in ids] == list("12345")


def test_token_bytes_maps_byte_alphabet(tok):
    space_the = tok.id_of("Ġthe")
    assert tok.token_bytes(space_the) == b" the"
    assert tok.token_bytes(tok.id_of("Ċ")) == b"\n"
    with pytest.raises(KeyError):
        tok.id_of("definitely-not-a-token-xyz")


def test_partial_utf8_tokens(tok):
    ids = tok.encode("🤗")
    assert len(ids) > 1  # the emoji is split across byte tokens
    parts = [tok.token_bytes(i) for i in ids]
    assert b"".join(parts) == "🤗".encode()
    assert "\ufffd" in tok.token_text(ids[0])  # a lone partial sequence shows as U+FFFD
