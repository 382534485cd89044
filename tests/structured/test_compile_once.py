"""ConstraintCompiler under concurrency: one grammar is compiled once however many threads ask for
it at the same time (the surfaces compile off the event loop, in threads), and a schema sent again
skips llguidance's schema-to-grammar conversion."""
from __future__ import annotations

import threading

from aotx.structured import ConstraintCompiler, ConstraintError
from tests.waiting import wait_until

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
          "required": ["a"], "additionalProperties": False}


class Counting(ConstraintCompiler):
    """Counts builds; the first build waits at `gate` until the test opens it."""

    def __init__(self, tokenizer, shared: ConstraintCompiler) -> None:
        super().__init__(tokenizer)
        self._ll = shared.ll_tokenizer     # llguidance's tokenizer, built once per session (~1 s)
        self.builds, self.grammars = 0, 0
        self.building, self.gate = threading.Event(), threading.Event()

    def _build(self, kind, digest, grammar):
        self.builds += 1
        self.building.set()
        assert self.gate.wait(timeout=60)
        return super()._build(kind, digest, grammar)

    def _convert(self, schema):
        self.grammars += 1
        return super()._convert(schema)


def test_concurrent_requests_for_one_grammar_compile_it_once(tokenizer, compiler):
    compiler = Counting(tokenizer, compiler)
    got: list = []
    first = threading.Thread(target=lambda: got.append(compiler.json_schema(SCHEMA)))
    first.start()
    assert compiler.building.wait(timeout=60)
    others = [threading.Thread(target=lambda: got.append(compiler.json_schema(dict(SCHEMA))))
              for _ in range(3)]
    for t in others:
        t.start()
    wait_until(lambda: compiler.waiting() == 3, "three threads waiting on the build in flight")
    compiler.gate.set()
    for t in [first, *others]:
        t.join(timeout=60)
    assert len(got) == 4 and all(c is got[0] for c in got)
    assert compiler.builds == 1 and compiler.waiting() == 0


def test_a_schema_sent_again_is_not_converted_again(tokenizer, compiler):
    compiler = Counting(tokenizer, compiler)
    compiler.gate.set()
    a = compiler.json_schema(SCHEMA)
    b = compiler.json_schema({"additionalProperties": False, **SCHEMA})   # same schema, other key order
    assert a is b and compiler.grammars == 1 and compiler.builds == 1


def test_a_failed_build_fails_its_waiters_too_and_is_not_cached(tokenizer, compiler):
    compiler = Counting(tokenizer, compiler)
    bad = "start: x\n"       # a grammar llguidance refuses (x is not defined)
    errors: list = []

    def ask() -> None:
        try:
            compiler.from_grammar("json_schema", bad)
        except ConstraintError as exc:
            errors.append(str(exc))

    first = threading.Thread(target=ask)
    first.start()
    assert compiler.building.wait(timeout=60)
    second = threading.Thread(target=ask)
    second.start()
    wait_until(lambda: compiler.waiting() == 1, "the second thread waiting on the failing build")
    compiler.gate.set()
    first.join(timeout=60)
    second.join(timeout=60)
    assert len(errors) == 2 and errors[0] == errors[1] and compiler.cached() == 0
