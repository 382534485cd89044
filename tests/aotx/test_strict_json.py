"""aotx.strict_json: what every client body is parsed with and every wire document is written with."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aotx.strict_json import MAX_JSON_DEPTH, JsonInputError, dumps, loads, nesting_depth


def nested(depth: int, leaf: str = "1") -> str:
    """`depth` containers, alternating arrays and objects, around `leaf`."""
    text = leaf
    for k in range(depth):
        text = f"[{text}]" if k % 2 else f'{{"k":{text}}}'
    return text


def test_the_limit_is_documented_and_leaves_room_for_tool_schemas():
    # a chat body reaches a tool's parameters at depth 5; each nested object schema adds 2 levels:
    # the limit must hold OpenAI's 10 levels of schema nesting with room to spare
    assert 5 + 2 * 10 < MAX_JSON_DEPTH <= 128


@pytest.mark.parametrize("depth", [0, 1, 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH])
def test_up_to_the_limit_parses(depth):
    assert nesting_depth(nested(depth)) == depth
    assert loads(nested(depth)) == json.loads(nested(depth))


@pytest.mark.parametrize("text", [nested(MAX_JSON_DEPTH + 1), nested(1000), "[" * 100_000 + "]" * 100_000,
                                  '{"a": ' + "[" * 999 + "]" * 999 + "}"])
def test_deeper_is_a_precise_error_not_a_recursion_error(text):
    with pytest.raises(JsonInputError, match=f"deeper than {MAX_JSON_DEPTH}"):
        loads(text)


def test_unclosed_deep_nesting_is_refused_before_the_decoder_recurses():
    with pytest.raises(JsonInputError, match="deeper"):
        loads("[" * 5000)


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[" * 500 + "{" * 500, "b": '\\"[[[[', "c": ["]]]]" * 100]})
    assert nesting_depth(text) == 2
    assert loads(text)["a"].startswith("[[[")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("where", ["{0}", '{{"x":{0}}}', "[1,{0}]", '{{"a":[{{"b":{0}}}]}}'])
def test_non_finite_literals_are_refused(literal, where):
    with pytest.raises(JsonInputError, match=literal.lstrip("-")):
        loads(where.format(literal))


@pytest.mark.parametrize("number", ["1e999", "-1e400", "1.5e309"])
def test_numbers_that_overflow_to_infinity_are_refused(number):
    with pytest.raises(JsonInputError, match="overflows"):
        loads(f'{{"t": {number}}}')


def test_an_integer_too_long_for_int_is_a_precise_error():
    with pytest.raises(JsonInputError, match="digits"):
        loads('{"n": ' + "1" * 5000 + "}")


def test_ordinary_json_errors_stay_json_decode_errors():
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": }')


def test_pairs_hook_is_honoured():
    assert loads('{"a": 1, "b": 2}', object_pairs_hook=list) == [("a", 1), ("b", 2)]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"a": [1.0, math.nan]}])
def test_dumps_never_writes_nan_or_infinity(value):
    with pytest.raises(ValueError):
        dumps(value)


def test_dumps_keeps_unicode():
    assert dumps({"é": "☃"}) == '{"é": "☃"}'


finite = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                      | st.text(), lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=20)


@given(finite)
def test_round_trip_of_finite_documents(value):
    text = dumps(value)
    assert nesting_depth(text) <= MAX_JSON_DEPTH
    assert loads(text) == json.loads(text)


def test_a_hooks_own_value_error_passes_through():
    class Duplicate(ValueError):
        pass

    def no_duplicates(pairs):
        raise Duplicate("twice")
    with pytest.raises(Duplicate):
        loads('{"a": 1}', object_pairs_hook=no_duplicates)
