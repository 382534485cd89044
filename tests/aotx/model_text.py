"""Hypothesis strategies for what a model may write when offered tools: text, and <tool_call>
blocks whose arguments are JSON with hostile text spliced in (NaN, Infinity, numbers that
overflow a double or int()'s digit bound, nesting past strict_json.MAX_JSON_DEPTH, unfinished
strings, stray closes), with or without their closing braces and tag."""
from __future__ import annotations

import json

from hypothesis import strategies as st

_SCALARS = (st.none() | st.booleans() | st.integers() | st.text(max_size=6) |
            st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) |
                      st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)
HOSTILE = st.sampled_from(["NaN", "-Infinity", "Infinity", "1e999", "-2.5e308", "1" * 4301,
                           "1e-999", "[" * 70, "]" * 3, "[" * 2000 + "]" * 2000, '"unfinished',
                           "\n", "}", "}}}", "</tool_call>", "<tool_call>", ",", ":"])
TEXT = st.text(alphabet="ab .\n<>/{}", max_size=12)


@st.composite
def arguments(draw, hostile: bool | None = None) -> str:
    """A JSON object's text, maybe with one hostile piece spliced in anywhere."""
    args = json.dumps(draw(st.dictionaries(st.text(max_size=4), VALUES, max_size=3)))
    if hostile if hostile is not None else draw(st.booleans()):
        k = draw(st.integers(1, len(args)))
        args = args[:k] + draw(HOSTILE) + args[k:]
    return args


@st.composite
def call_text(draw) -> str:
    tail = draw(st.sampled_from(["}", "", "}}", "} junk"])) + draw(st.sampled_from(
        ["</tool_call>", "\n</tool_call>", "", "</tool_"]))
    name = draw(st.sampled_from(['"get_weather"', '"f"', '""', "3"]))
    key = draw(st.sampled_from(["arguments", "parameters"]))
    return f'<tool_call>\n{{"name": {name}, "{key}": {draw(arguments())}{tail}'


model_text = st.lists(call_text() | TEXT, min_size=1, max_size=4).map("".join)


def split(data, text: str) -> list[str]:
    """`text` cut into deltas at points `data` draws."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=10)))
    return [p for p in (text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])) if p]
