"""aotx.structured: compiling constraints, the per-row matcher, and the tool-call grammar."""
from __future__ import annotations

import json

import numpy as np
import pytest

from aotx.chat_types import ToolSpec
from aotx.structured import ConstraintError
from aotx.tool_calls import forced_call_primer, named_choice
from kernels.token_mask import allowed_ids, mask_words

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def walk(constraint, tokenizer, text: str) -> tuple[bool, bool]:
    """Feed `text`'s tokens one by one, checking each is in the mask first: (all allowed, accepting)."""
    m = constraint.start()
    bits = np.zeros(mask_words(tokenizer.vocab_size), dtype=np.uint32)
    for tid in tokenizer.encode(text):
        m.fill(bits)
        if tid not in set(allowed_ids(bits, tokenizer.vocab_size).tolist()):
            return False, False
        assert m.consume(tid)
    return True, m.accepting


def test_schema_text_is_allowed_and_closes_with_eos(compiler, tokenizer):
    c = compiler.json_schema(PERSON)
    ok, accepting = walk(c, tokenizer, '{"name": "Ann", "age": 31}')
    assert ok and accepting
    m = c.start()
    for tid in tokenizer.encode('{"name": "Ann", "age": 31}'):
        m.consume(tid)
    bits = np.zeros(mask_words(tokenizer.vocab_size), dtype=np.uint32)
    m.fill(bits)
    assert allowed_ids(bits, tokenizer.vocab_size).tolist() == [tokenizer.eos_id]


def test_eos_is_refused_until_the_value_is_complete(compiler, tokenizer):
    m = compiler.json_schema(PERSON).start()
    for tid in tokenizer.encode('{"name": "Ann"'):
        m.consume(tid)
    bits = np.zeros(mask_words(tokenizer.vocab_size), dtype=np.uint32)
    m.fill(bits)
    allowed = set(allowed_ids(bits, tokenizer.vocab_size).tolist())
    assert tokenizer.eos_id not in allowed and allowed
    assert not m.accepting


def test_wrong_text_is_not_allowed(compiler, tokenizer):
    assert walk(compiler.json_schema(PERSON), tokenizer, '{"name": 3')[0] is False
    assert walk(compiler.json_object(), tokenizer, '[1]')[0] is False
    assert walk(compiler.json_object(), tokenizer, '{"a": [1, {"b": null}]}') == (True, True)


def test_compiled_once_per_grammar(compiler):
    a = compiler.json_schema(dict(PERSON))
    b = compiler.json_schema(json.loads(json.dumps(PERSON)))
    assert a is b and a.kind == "json_schema" and len(a.digest) == 64


@pytest.mark.parametrize("schema, words", [
    ({"type": "string", "format": "no-such-format"}, "format"),
    ({"type": "object", "if": {"type": "object"}}, "if"),
    ({"type": "integer", "minimum": 5, "maximum": 2}, "minimum"),
    ({"$ref": "#/definitions/missing"}, "missing"),
    ([1, 2], "object"),
])
def test_what_cannot_be_enforced_is_refused(compiler, schema, words):
    with pytest.raises(ConstraintError) as err:
        compiler.json_schema(schema)
    assert words in str(err.value)


TOOLS = [ToolSpec("get_weather", "", {"type": "object", "properties": {"city": {"type": "string"}},
                                     "required": ["city"], "additionalProperties": False}, strict=True),
         ToolSpec("note", "", {"type": "object"})]


def test_named_tool_call_grammar(compiler, tokenizer):
    primer = forced_call_primer(TOOLS, named_choice("get_weather"))
    c = compiler.tool_call(TOOLS, "named", "get_weather", primer)
    out = '{"city": "Paris"}}\n</tool_call>'
    assert walk(c, tokenizer, out) == (True, True)
    assert walk(c, tokenizer, '{"town": "Paris"}}\n</tool_call>')[0] is False


def test_required_tool_call_grammar(compiler, tokenizer):
    primer = forced_call_primer(TOOLS, "required")
    c = compiler.tool_call(TOOLS, "required", None, primer)
    assert walk(c, tokenizer, 'note", "arguments": {"x": 1}}\n</tool_call>') == (True, True)
    assert walk(c, tokenizer, 'get_weather", "arguments": {"city": 1}}')[0] is False
    assert walk(c, tokenizer, 'nope", "arguments": {}}')[0] is False


def test_auto_tool_grammar_allows_text_or_strict_calls(compiler, tokenizer):
    c = compiler.tool_call(TOOLS, "auto", None, "")
    assert walk(c, tokenizer, "It is sunny.") == (True, True)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    assert walk(c, tokenizer, "Let me check. " + call) == (True, True)
    assert walk(c, tokenizer, '<tool_call>\n{"name": "get_weather", "arguments": {"city": 2}}')[0] is False


def test_primer_must_match_the_mode(compiler):
    with pytest.raises(ConstraintError):
        compiler.tool_call(TOOLS, "named", "get_weather", "")


def test_the_engine_and_the_service_load_llguidance_only_when_asked():
    """GPU images without the wheel run every unconstrained path (benches, gpu-check)."""
    import subprocess
    import sys
    code = ("import sys, aotx.serving, aotx.engine.masks, kernels.cuda.overlap, ops.gpu.kernel_check; "
            "assert 'llguidance' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_each_sequence_starts_its_own_matcher(compiler, tokenizer):
    c = compiler.json_schema(PERSON)
    a, b = c.start(), c.start()
    for tid in tokenizer.encode('{"name": "Ann", "age": 31}'):
        assert a.consume(tid)
    assert a.accepting and not b.accepting and b.consumed == 0
    assert walk(c, tokenizer, '{"name": "Bo", "age": 2}') == (True, True)
    assert not a.sync(0, tokenizer.encode("x")[0]) and a.sync(0, tokenizer.encode('{"name": "Ann", "age": 31}')[0])


def test_a_batch_of_rows_advances_as_each_row_alone(compiler, tokenizer):
    """batch.sync_rows == RowMatcher.sync row by row; a refused token marks
    only its own index and later ones (an earlier token still reads as consumed and allowed), and
    its reason is kept without asking the llguidance matcher again (a fill thread may hold it)."""
    from aotx.structured import batch
    c = compiler.json_schema(PERSON)
    good = tokenizer.encode('{"name": "Ann", "age": 31}')
    bad_tok = tokenizer.encode("x")[0]
    rows, alone = [c.start() for _ in range(3)], [c.start() for _ in range(3)]
    for i, tok in enumerate(good[:4]):
        toks = [tok, tok, bad_tok if i == 2 else tok]
        got = batch.sync_rows(rows, [i] * 3, toks)
        assert got == [m.sync(i, t) for m, t in zip(alone, toks)]
        assert got == [True, True, i < 2]
    assert [m.consumed for m in rows] == [4, 4, 4]
    assert batch.sync_rows(rows, [1, 1, 1], [good[1]] * 3) == [True, True, True]   # consumed already
    failed = rows[2]
    assert failed.sync(1, good[1]) and not failed.sync(2, bad_tok) and failed.failed
    assert failed.error
