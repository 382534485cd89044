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


def test_no_token_is_longer_than_max_token_bytes(tok):
    assert tok.max_token_bytes == max(len(tok.token_bytes(i)) for i in range(tok.vocab_size))


def test_encode_releases_the_gil(tok):
    """A long text tokenized in a worker thread leaves the others running (the event loop with it):
    a thread counting in pure Python keeps counting while encode works."""
    import threading
    import time

    text = "The quick brown fox 12 jumps over the lazy dog. " * 20000    # ~1 MB: about a second of work
    ticks, done = [], threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.005)

    thread = threading.Thread(target=ticker)
    thread.start()
    start = time.perf_counter()
    ids = tok.encode(text)
    took = time.perf_counter() - start
    done.set()
    thread.join()
    gaps = [b - a for a, b in zip(ticks, ticks[1:]) if b > start]
    assert len(ids) > 100000 and gaps
    assert max(gaps) < max(0.5, took / 2), (max(gaps), took)   # held the GIL all along: one gap ~ took
