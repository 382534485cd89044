"""aotx.json_prefix: a strict, incremental JSON prefix reader."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jiter import from_json

from aotx import strict_json
from aotx.json_prefix import JsonPrefix

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                   allow_infinity=False) | st.text()
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) |
                       st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
_objects = st.dictionaries(st.text(max_size=6), _values, max_size=5)


def read(text: str) -> tuple[JsonPrefix, int]:
    """Feed `text`; return the reader and how many characters it accepted."""
    reader = JsonPrefix()
    for k, c in enumerate(text):
        if not reader.feed(c):
            return reader, k
    return reader, len(text)


@settings(max_examples=200, deadline=None)
@given(_objects, st.sampled_from([None, 2]), st.booleans(), st.booleans())
def test_every_serialised_object_is_read_whole_and_completes_at_its_end(obj, indent, ascii, compact):
    text = json.dumps(obj, indent=indent, ensure_ascii=ascii,
                      separators=(",", ":") if compact else None)
    reader = JsonPrefix()
    for k, c in enumerate(text):
        assert not reader.complete
        assert reader.feed(c), f"refused {c!r} at {k} of {text!r}"
        # every accepted prefix is one the SDKs' partial parser takes
        from_json(text[:k + 1].encode(), partial_mode=True)
    assert reader.complete and reader.closers() == ""
    assert not reader.feed(" ") and not reader.feed("}")


_JSONISH = st.text(alphabet='{}[]":,. -+0123456789eEtrufalsn\\u\n abxdNIiy', max_size=40)
_HOSTILE = st.sampled_from(["NaN", "-Infinity", "Infinity", "1e999", "-1.5e309", "9" * 400 + ".5",
                            "1e-999", "1.7976931348623157e308", "1" * 4301, "[" * 70, "{\"k\": " * 70])


@settings(max_examples=400, deadline=None)
@given(st.lists(_JSONISH | _HOSTILE, max_size=4).map("".join))
def test_accepted_text_is_a_json_prefix_and_closers_complete_it(text):
    """Tool arguments are an object: the text starts with "{". What the reader accepts stays
    within strict_json's bounds: completed, it is what strict_json.loads reads."""
    reader, n = read("{" + text)
    accepted = ("{" + text)[:n]
    from_json(accepted.encode(), partial_mode=True)    # never a parse error for the SDKs
    if reader.complete:
        strict_json.loads(accepted)
    closers = reader.closers()
    if closers is not None:
        strict_json.loads(accepted + closers)
    for c in "}]0 ":
        assert not reader.broken or not reader.feed(c), "a broken bound is final"


@pytest.mark.parametrize("text,refused_at", [
    ('{a', 1), ('{"a" 1', 5), ('{"a": 01', 7), ('{"a": 1.}', 8), ('{"a": tx', 7),
    ('{"a": NaN', 6), ('{"a": "\x01"', 7), ('{"a": "\\x"', 8), ('{"a": [1,]', 9),
    ('{"a": 1}}', 8), ('{"a": "\\ude00"', 12), ('{"a": "\\ud83d"', 13), ('{"a": "\\ud83dx', 13),
])
def test_invalid_json_is_refused_where_it_breaks(text, refused_at):
    assert read(text)[1] == refused_at


@pytest.mark.parametrize("text,refused_at", [
    ('{"a": 1e999}', 10),                  # the digit that overflows a double
    ('{"a": -1.5e309', 13),
    ('{"a": ' + "9" * 400 + ".5", 6 + 400 + 1),
    ('{"a": ' + "1" * 4301, 6 + 4300),     # an integer past Python's int-conversion bound
    ("[" * 65, 64),                        # nested past MAX_JSON_DEPTH
    ('{"a": ' + '{"b": ' * 64 + "1", 6 + 6 * 63),   # the 65th object
])
def test_a_broken_bound_is_refused_and_cannot_be_repaired(text, refused_at):
    """Closing the brackets after `1e99` would hand on a number the model never wrote."""
    reader, n = read(text)
    assert n == refused_at and reader.broken and reader.closers() is None


@pytest.mark.parametrize("text", ['{"a": 1.7976931348623157e308}', '{"a": 1e-999}',
                                  '{"a": ' + "1" * 4300 + "}", "[" * 64 + "]" * 64])
def test_within_the_bounds_is_json(text):
    reader, n = read(text)
    assert n == len(text) and reader.complete and not reader.broken
    strict_json.loads(text)


@pytest.mark.parametrize("text,closers", [
    ('{', "}"), ('{"a": 1', "}"), ('{"a": {"b": [1, 2', "]}}"), ('{"a": "x"}', ""),
    ('{"a": "x', None), ('{"a":', None), ('{"a": 1,', None), ('{"a": tr', None), ('{"a": 1e', None),
    ('{"a": "\\ud83d\\ude00"', "}"),
])
def test_closers(text, closers):
    reader, n = read(text)
    assert n == len(text) and reader.closers() == closers
