"""Property: over generated JSON schemas (objects, arrays, enums, bounded numbers, nesting), the numpy
engine's constrained output is valid JSON that validates against the schema, whenever it ends with
"stop"; a schema that cannot be enforced is refused when it is compiled (a 400 on the wire), and a
run that spends its budget first ends with "length" (cut output: never counted, never claimed valid).
"""
from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aotx.engine import SamplingParams
from aotx.structured import ConstraintCompiler, ConstraintError

KEYS = st.sampled_from(["a", "b", "id", "name", "x", "value", "n"])
WORDS = st.lists(st.sampled_from(["red", "green", "blue", "yes", "no", "cat", "dog"]), min_size=1,
                 max_size=4, unique=True)


@st.composite
def integers(draw):
    lo = draw(st.integers(-1000, 1000))
    return {"type": "integer", "minimum": lo, "maximum": lo + draw(st.integers(-5, 2000))}


@st.composite
def numbers(draw):
    lo = draw(st.integers(-100, 100))
    return {"type": "number", "minimum": lo, "maximum": lo + draw(st.integers(0, 500))}


LEAVES = st.one_of(
    integers(), numbers(), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 8)),
    st.builds(lambda w: {"enum": w}, WORDS),
    st.builds(lambda w: {"type": "string", "enum": w}, WORDS),
)


def _array(inner):
    return st.builds(lambda i, m: {"type": "array", "items": i, "maxItems": m}, inner, st.integers(0, 3))


@st.composite
def _object(draw, inner):
    props = draw(st.dictionaries(KEYS, inner, min_size=1, max_size=3))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


SCHEMAS = st.recursive(LEAVES, lambda inner: st.one_of(_array(inner), _object(inner)), max_leaves=6)


@pytest.fixture(scope="module")
def engine(bundle, numpy_backend):
    from aotx.engine import Engine, EngineConfig
    eng = Engine(numpy_backend, bundle.tokenizer, EngineConfig(num_pages=numpy_backend.num_pages,
                                                               page_size=numpy_backend.page_size, max_model_len=1024))
    eng.start()
    yield eng
    asyncio.run(eng.stop())


@pytest.fixture(scope="module")
def compiler(bundle):
    return ConstraintCompiler(bundle.tokenizer)


def _unsatisfiable(schema) -> bool:
    """No value validates: an integer range that is empty, or an object with such a *required* property (an
    optional one is left out; an array, with no minItems here, may be empty)."""
    if isinstance(schema, dict):
        if schema.get("type") == "integer" and schema["minimum"] > schema["maximum"]:
            return True
        props = schema.get("properties", {})
        return any(_unsatisfiable(props[k]) for k in schema.get("required", ()))
    return False


async def _runs(engine, prompt, constraint):
    handles = [engine.submit(prompt, SamplingParams(max_tokens=40, temperature=t, seed=s, constraint=constraint))
               for t, s in ((0.0, None), (1.0, 1), (1.0, 2))]
    outs = []
    for h in handles:
        deltas = [d async for d in h]
        outs.append(("".join(d.text for d in deltas), deltas[-1].finish_reason))
    return outs


EXAMPLES = max(6, settings.default.max_examples // 16)   # 3 model requests each: ~2 s an example on CI


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                      HealthCheck.too_slow])
@given(schema=SCHEMAS)
def test_constrained_output_validates_or_is_refused(engine, compiler, chat_prompt, schema):
    try:
        constraint = compiler.json_schema(schema)
    except ConstraintError:
        assert _unsatisfiable(schema), schema     # refused only for a reason (minimum > maximum)
        event("refused at compile time")
        return
    assert not _unsatisfiable(schema)
    prompt = chat_prompt(f"Reply with JSON for this schema: {json.dumps(schema)}")
    for text, finish in asyncio.run(_runs(engine, prompt, constraint)):
        assert finish in ("stop", "length"), (schema, text, finish)
        event(f"finish {finish}")       # --hypothesis-show-statistics: how many runs closed
        if finish == "stop":
            jsonschema.validate(json.loads(text), schema)
