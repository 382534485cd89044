"""Compile a request's constraint once: JSON schema / any JSON object / a tool call -> Constraint.

Grammars are llguidance's; compiled constraints are cached by the sha256 of their grammar, and a
JSON schema's grammar by the schema's canonical JSON, so a schema sent again costs a dictionary
look-up (no conversion, no compile). Compiling is thread-safe and single-flight: callers compile
off the event loop, in threads (api.structured.parsed, aotx.engine_service), and concurrent
callers asking for one grammar wait for the one build in flight. Whatever llguidance cannot enforce exactly (an
unknown keyword, an unknown format, an unsatisfiable schema, a broken $ref) raises
ConstraintError with llguidance's reason: the surface answers 400 naming its param. Nothing is
ever compiled "leniently": a keyword is enforced or the request is refused.

JSON is generated compact with one space after ':' and ',' (whitespace_flexible off): a small
model cannot then spend its budget on whitespace, and the text parses the same either way.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence

import llguidance

from aotx.structured.constraint import Constraint
from aotx.structured.tokenizer_key import tokenizer_source
from aotx.structured.tool_grammar import tool_call_lark

JSON_OPTIONS = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", ",
                "lenient": False}
CACHE_SIZE = 256
MESSAGE_MAX = 300


class ConstraintError(ValueError):
    """The constraint cannot be enforced exactly; `str(exc)` says why (llguidance's words)."""


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= MESSAGE_MAX else message[:MESSAGE_MAX] + "…"


class _Flight:
    """A build in flight: its waiters block on `done`, then read `result` or `error`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Constraint | None = None
        self.error: BaseException | None = None
        self.waiters = 0


class ConstraintCompiler:
    """One per tokenizer (the serving process keeps one); thread-safe."""

    def __init__(self, tokenizer) -> None:
        self._source = tokenizer
        self._ll: llguidance.LLTokenizer | None = None
        self._ll_source: tuple | None = None    # Constraint.source: how a matcher process builds it
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Constraint] = OrderedDict()
        self._grammars: OrderedDict[str, str] = OrderedDict()     # canonical schema JSON -> grammar
        self._flights: dict[str, _Flight] = {}

    @property
    def ll_tokenizer(self) -> llguidance.LLTokenizer:
        """llguidance's view of the model's tokenizer (built on first use: ~0.3 s)."""
        with self._lock:
            if self._ll is None:
                self._ll_source = tokenizer_source(self._source)
                _, text, n_vocab, eos = self._ll_source
                self._ll = llguidance.LLTokenizer(text, n_vocab=n_vocab, eos_token=eos)
            return self._ll

    # -- the three kinds ------------------------------------------------------
    def json_schema(self, schema: object) -> Constraint:
        """Output is one JSON value valid against `schema` (a JSON Schema object)."""
        if not isinstance(schema, dict):
            raise ConstraintError("the schema must be a JSON object")
        return self._compiled("json_schema", self._grammar(schema))

    def _grammar(self, schema: dict) -> str:
        """The schema's llguidance grammar (cached by the schema's canonical JSON)."""
        key = json.dumps(schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            hit = self._grammars.get(key)
            if hit is not None:
                self._grammars.move_to_end(key)
                return hit
        grammar = self._convert(schema)
        with self._lock:
            self._grammars[key] = grammar
            while len(self._grammars) > CACHE_SIZE:
                self._grammars.popitem(last=False)
        return grammar

    def json_object(self) -> Constraint:
        """Output is one JSON object, any keys and values (JSON mode)."""
        return self.json_schema({"type": "object"})

    def tool_call(self, tools: Sequence, mode: str, forced: str | None, primer: str,
                  answer: dict | None = None) -> Constraint:
        """Output continues `primer` into tool calls in aotx.tool_calls' format: `mode` "required"
        (at least one call, no text), "named" (one call of `forced`), or "auto" (text, or text then
        calls; with `answer`, a JSON answer valid against that schema or calls). A strict tool's
        arguments follow its schema, any other tool's are a JSON object."""
        try:
            lark = tool_call_lark(tools, mode, forced, primer, JSON_OPTIONS, answer)
        except ValueError as exc:
            raise ConstraintError(_short(str(exc))) from None
        return self._compiled("tool_call", llguidance.LLMatcher.grammar_from_lark(lark))

    def from_grammar(self, kind: str, grammar: str) -> Constraint:
        """A constraint from its llguidance grammar (one another process compiled: the HTTP workers
        send a request's grammar to the engine process); checked again, cached by digest."""
        if kind not in ("json_schema", "json_object", "tool_call"):
            raise ConstraintError(f"unknown constraint kind {kind!r}")
        return self._compiled(kind, grammar)

    # -- compile + cache ---------------------------------------------------------
    @staticmethod
    def _convert(schema: dict) -> str:
        try:
            return llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=JSON_OPTIONS)
        except ValueError as exc:
            raise ConstraintError(_short(str(exc))) from None

    def cached_grammar(self, grammar: str) -> bool:
        """Whether `grammar` is compiled already (from_grammar would be a look-up)."""
        with self._lock:
            return hashlib.sha256(grammar.encode()).hexdigest() in self._cache

    def _compiled(self, kind: str, grammar: str) -> Constraint:
        digest = hashlib.sha256(grammar.encode()).hexdigest()
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._cache.move_to_end(digest)
                return hit
            flight = self._flights.get(digest)
            mine = flight is None
            if mine:
                flight = self._flights[digest] = _Flight()
            else:
                flight.waiters += 1
        if not mine:            # another thread builds it: wait for that build (or its error)
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.result is not None
            return flight.result
        try:
            flight.result = self._build(kind, digest, grammar)
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flights[digest]
                if flight.result is not None:
                    self._cache[digest] = flight.result
                    while len(self._cache) > CACHE_SIZE:
                        self._cache.popitem(last=False)
            flight.done.set()
        return flight.result

    def _build(self, kind: str, digest: str, grammar: str) -> Constraint:
        tok = self.ll_tokenizer
        error = llguidance.LLMatcher.validate_grammar(grammar, tok)
        if error:
            raise ConstraintError(_short(error))
        constraint = Constraint(kind, digest, grammar, tok, source=self._ll_source)
        constraint.prepare()        # its prototypes (one lexer each) built here, at parse time, once
        return constraint

    def cached(self) -> int:
        with self._lock:
            return len(self._cache)

    def waiting(self) -> int:
        """Threads waiting on a build in flight (for tests and metrics)."""
        with self._lock:
            return sum(f.waiters for f in self._flights.values())

