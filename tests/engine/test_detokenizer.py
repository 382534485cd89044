from aotx.engine.detokenizer import Detokenizer


class ByteTape:
    """Tokens are indexes into a list of byte strings."""

    eos_id = 0

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = [b"<eos>", *pieces]

    def token_bytes(self, token_id: int) -> bytes:
        return self.pieces[token_id]


def run(tape: ByteTape, ids, stop=(), stop_ids=frozenset({0})):
    d = Detokenizer(tape, stop, stop_ids)
    released = []
    for t in ids:
        step = d.add(t)
        released.append(step.text)
        if step.finish_reason:
            return released, step
    step = d.flush()
    released.append(step.text)
    return released, step


def test_emoji_split_over_three_tokens_is_released_whole():
    e = "😀".encode()                       # f0 9f 98 80
    tape = ByteTape(b"hi " + e[:1], e[1:3], e[3:] + b"!")
    released, end = run(tape, [1, 2, 3])
    assert released == ["hi ", "", "😀!", ""]
    assert "\ufffd" not in "".join(released) and end.finish_reason is None


def test_emoji_split_over_two_tokens_and_cjk():
    e, cjk = "🎉".encode(), "中文".encode()     # 4 bytes; 3+3 bytes
    tape = ByteTape(e[:2], e[2:] + cjk[:4], cjk[4:])
    released, _ = run(tape, [1, 2, 3])
    assert released == ["", "🎉中", "文", ""]


def test_undecodable_leftover_is_replaced_only_at_the_end():
    tape = ByteTape(b"ok", b"\xe4\xb8")       # a truncated 3-byte character
    released, end = run(tape, [1, 2])
    assert released == ["ok", "", "\ufffd"]
    assert end.finish_reason is None


def test_stop_string_split_across_tokens():
    tape = ByteTape(b"Hello </", b"s", b"top> more")
    released, end = run(tape, [1, 2, 3], stop=("</stop>",))
    assert "".join(released) == "Hello "
    assert end.finish_reason == "stop" and end.stop_sequence == "</stop>"
    assert all("<" not in r for r in released)


def test_false_prefix_is_released_once_disproved():
    tape = ByteTape(b"a <", b"/s", b"pan>", b" b")
    released, end = run(tape, [1, 2, 3, 4], stop=("</stop>",))
    assert released == ["a ", "", "</span>", " b", ""]
    assert end.finish_reason is None


def test_earliest_of_several_stops_wins_and_prefix_held_at_end_is_released():
    tape = ByteTape(b"xx END yy STOP", b" E")
    released, end = run(tape, [1], stop=("STOP", "END"))
    assert released == ["xx "] and end.stop_sequence == "END"
    released, end = run(tape, [2], stop=("END",))
    assert released == [" ", "E"] and end.finish_reason is None


def test_eos_and_stop_token_ids_end_without_text():
    tape = ByteTape(b"one", b" two", b"<|im_end|>")
    released, end = run(tape, [1, 2, 0, 1])
    assert "".join(released) == "one two" and end.finish_reason == "stop"
    assert end.stop_sequence is None
    released, end = run(tape, [1, 3], stop_ids={0, 3})
    assert released == ["one", ""] and end.finish_reason == "stop"


def test_eos_releases_held_stop_prefix():
    tape = ByteTape(b"value <", b"")
    released, end = run(tape, [1, 0], stop=("<stop>",))
    assert released == ["value ", "<"] and end.finish_reason == "stop"


def test_real_tokenizer_round_trip_never_splits_characters(bundle):
    tok = bundle.tokenizer
    text = "Emoji 😀🎉 and 中文字符, café — done."
    ids = tok.encode(text)
    d = Detokenizer(tok, stop=("done",), stop_token_ids={tok.eos_id})
    pieces = []
    for t in ids:
        step = d.add(t)
        pieces.append(step.text)
        if step.finish_reason:
            break
    assert "".join(pieces) == "Emoji 😀🎉 and 中文字符, café — "
    assert all("\ufffd" not in p for p in pieces)
    assert step.finish_reason == "stop" and step.stop_sequence == "done"


def test_a_token_costs_the_same_late_in_a_long_answer():
    """No work or memory proportional to the text released so far: one more token after 20,000
    allocates a few hundred bytes, not a copy of the whole answer."""
    import tracemalloc

    for stop in ((), ("STOP",)):
        d = Detokenizer(ByteTape(b"word "), stop, frozenset({0}))
        for _ in range(20_000):
            d.add(1)
        tracemalloc.start()
        try:
            d.add(1)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 4_000, (stop, peak)
        assert d.text == "word " * 20_001


def test_plain_releases_what_add_would_and_declines_stops_and_silent_ids():
    e = "😀".encode()
    tape = ByteTape(b"a", e[:2], e[2:], b"b")
    ids = [1, 2, 3, 4]
    texts: dict = {}      # shared by the detokenizers of one engine: whole-UTF-8 token texts
    by_add, by_plain = Detokenizer(tape, (), frozenset({0})), Detokenizer(tape, (), frozenset({0}), texts=texts)
    assert [by_add.add(t).text for t in ids] == [by_plain.plain(t) for t in ids] == ["a", "", "😀", "b"]
    assert by_plain.text == by_add.text == "a😀b"
    assert texts == {1: "a", 2: None, 4: "b"}     # (3 came while a character was open: not looked up)
    again, plain_add = Detokenizer(tape, (), frozenset({0}), texts=texts), Detokenizer(tape, (), frozenset({0}))
    broken = (2, 4, 3, 1, 2, 3, 4)   # a cached whole token after half a character, then whole ones again
    assert [again.plain(t) for t in broken] == [plain_add.add(t).text for t in broken] == [
        "", "\ufffdb", "\ufffd\ufffd", "a", "", "😀", "b"]
    assert by_plain.plain(0) is None and not by_plain.done      # a stop id: add() decides, nothing done
    assert Detokenizer(tape, (), frozenset({0}), silent_ids=frozenset({4})).plain(4) is None
    assert Detokenizer(tape, ("b",), frozenset({0})).plain(1) is None   # stop strings: add() holds text back


def test_plain_delta_equals_the_constructed_one():
    from aotx.engine.types import Delta, plain_delta

    for queued in (None, 0.25):
        made = plain_delta("ab", 7, 30, 4, queued)
        assert made == Delta("ab", (7,), (), None, None, 30, 4, queued_s=queued)
        assert vars(made) == vars(Delta("ab", (7,), (), None, None, 30, 4, queued_s=queued))
