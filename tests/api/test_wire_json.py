"""The JSON provider's msgspec path writes exactly json's bytes, or stands aside (api.wire_json)."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from quart import Quart

from api.wire_json import StrictJSONProvider, compact_ascii

# strings over every ASCII character (controls, DEL, quote, backslash), some non-ASCII and lone surrogates
_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=12) | st.text(max_size=6)
_LEAF = st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2 ** 80), max_value=2 ** 80) | _TEXT
_PLAIN = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                      | st.dictionaries(_TEXT, inner, max_size=5), max_leaves=40)
# what msgspec must not write: floats (json spells them its own way) and other types json or Flask handle
_OTHER = st.recursive(_LEAF | st.floats(allow_nan=False) | st.sets(st.integers(), max_size=2) | st.binary(max_size=3),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT | st.integers(), inner,
                                                                                  max_size=4), max_leaves=20)


def _json(obj, sort_keys: bool) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, sort_keys=sort_keys, allow_nan=False).encode()


@settings(max_examples=400, deadline=None)
@given(_PLAIN, st.booleans())
def test_plain_values_are_written_as_json_writes_them(obj, sort_keys):
    fast = compact_ascii(obj, sort_keys)
    if fast is not None:
        assert fast == _json(obj, sort_keys)
    elif isinstance(obj, (str, list, tuple, dict)) and _json(obj, sort_keys).isascii():
        # standing aside is right only for non-ASCII or DEL in the text, or a lone surrogate
        text = json.dumps(obj, ensure_ascii=False)
        assert not text.isascii() or "\x7f" in text


@settings(max_examples=200, deadline=None)
@given(_OTHER, st.booleans())
def test_anything_else_is_left_to_json_or_written_the_same(obj, sort_keys):
    fast = compact_ascii(obj, sort_keys)
    if fast is not None:
        assert fast == _json(obj, sort_keys)


def test_floats_subclasses_cycles_and_deep_nesting_stand_aside():
    import enum

    class Level(enum.IntEnum):
        ONE = 1

    loop: list = []
    loop.append(loop)
    deep: list = []
    inner = deep
    for _ in range(600):
        inner.append([])
        inner = inner[0]
    for obj in (1.5, {"a": 1e16}, Level.ONE, {"k": Level.ONE}, {1: "a"}, loop, deep, "\ud800", "\x7f",
                "caf\u00e9", 10 ** 5000):
        assert compact_ascii(obj, True) is None, obj


def test_the_provider_text_and_data_agree_with_json():
    app = Quart("wire-json")
    app.json = StrictJSONProvider(app)
    receipt = {"operation": "op-" + "a" * 32, "sequence": "12", "status": {"commit": "committed", "terminal": None},
               "save": {"generation": 1, "disk_error": None}, "list": [1, True, "x\ny\"\\"], "command_bytes": 181}
    expected = _json(receipt, True) + b"\n"
    assert app.json.text(receipt).encode() == expected
    assert app.json.data(receipt) == expected
    for other in ({"x": 0.1}, {"t": "caf\u00e9"}):
        assert app.json.data(other) == app.json.text(other).encode() == _json(other, True) + b"\n"
    app.debug = True   # indented in debug mode, as before
    assert app.json.data(receipt) == (json.dumps(receipt, indent=2, sort_keys=True) + "\n").encode()
