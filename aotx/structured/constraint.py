"""A compiled constraint and the matcher one sequence runs through it.

A `Constraint` is immutable and shared (the compiler caches it by digest); every sequence that
uses it starts its own `RowMatcher`. The matcher's contract with the engine:

* `fill(bits)` writes the allowed next tokens into one uint32 row (bit ``t % 32`` of word
  ``t // 32`` is token ``t``); EOS is set only when the text so far is complete (accepting).
* `consume(token)` advances by a sampled token; False means the token was not allowed (a bug or a
  desynchronised row): the engine ends that request with an error, never with unconstrained text.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import llguidance
import numpy as np


@dataclass(frozen=True, eq=False)
class Constraint:
    kind: str                   # "json_schema", "json_object" or "tool_call"
    digest: str                 # sha256 of the grammar: the compiler's cache key
    grammar: str = field(repr=False)
    tokenizer: llguidance.LLTokenizer = field(repr=False)
    # matchers built once and never advanced: each sequence starts from a copy of one (~2 µs,
    # against ~0.5 ms, up to seconds for a large schema, to build one from the grammar)
    _proto: list = field(default_factory=list, repr=False, compare=False)
    _starts: list = field(default_factory=lambda: [0], repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # what builds `tokenizer` again in another process (aotx.structured.matcher_pool): (a key,
    # the HF tokenizer JSON, n_vocab, eos); None where the compiler did not say (no matcher processes)
    source: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def start(self) -> RowMatcher:
        """A matcher at the start of the grammar. llguidance's copy (``deep_copy``: its Matcher's clone,
        not deep_clone) shares the original's lexer -- its DFA cache, warm for every copy -- behind one
        mutex that a mask computation holds throughout, so the rows of one prototype fill one at a time
        whatever the executor's threads. Sequences are spread round-robin over up to ``lexers()``
        prototypes, each built from the grammar (its own lexer): aotx.structured.batch fills each
        prototype's rows on one thread. The first is built at parse time, the others when a second,
        third ... sequence starts (never for a constraint used by one sequence at a time)."""
        from aotx.structured.batch import lexers
        with self._lock:
            group = self._starts[0] % max(1, lexers())
            self._starts[0] += 1
            while len(self._proto) <= group:
                self._proto.append(llguidance.LLMatcher(self.tokenizer, self.grammar, log_level=0))
            proto = self._proto[group]
        return RowMatcher(proto.deep_copy(), group, self)


class RowMatcher:
    def __init__(self, matcher: llguidance.LLMatcher, group: int = 0, constraint: Constraint | None = None) -> None:
        self._m = matcher
        self.group = group              # its prototype (Constraint.start): the lexer it shares
        self.constraint = constraint    # where it came from (a matcher process starts its own copy)
        self._tokens: list[int] = []    # every token consumed, in order
        self._ok = True
        # the index of the first token refused, and why: read without touching the llguidance matcher,
        # which a mask-fill thread may be using (aotx.engine.mask_worker)
        self._bad_at: int | None = None
        self._why = ""

    @property
    def consumed(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        """Every token consumed, in order (a copy)."""
        return list(self._tokens)

    @property
    def failed(self) -> bool:
        return not self._ok

    @property
    def ll(self) -> llguidance.LLMatcher:
        return self._m

    def fill(self, bits: np.ndarray) -> None:
        """Write the next-token bitmask into `bits` (a C-contiguous uint32 row of the vocab's words)."""
        if bits.dtype != np.uint32 or not bits.flags["C_CONTIGUOUS"]:
            raise ValueError("the bitmask row must be a C-contiguous uint32 array")
        self._m.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
        self.check()

    def check(self) -> None:
        if self._m.is_error():
            raise RuntimeError(f"constraint matcher failed: {self._m.get_error()}")

    def consume(self, token_id: int) -> bool:
        token_id = int(token_id)
        accepted = self._m.consume_token(token_id)
        if accepted and self._ok and not self._m.is_error():    # the common case, with no more calls
            self._tokens.append(token_id)
            return True
        return self.consumed_as(token_id, bool(accepted))

    def consumed_as(self, token_id: int, accepted: bool) -> bool:
        """Record `token_id` as consumed by the llguidance matcher (here, or by a batch consume:
        aotx.structured.batch.sync_rows) with `accepted`, what that consume returned."""
        ok = accepted and not self._m.is_error()
        if not ok and self._bad_at is None:
            self._bad_at = len(self._tokens)
            why = self._m.get_error() if self._m.is_error() else f"token {int(token_id)} is not allowed"
            self._why = " ".join(why.split())[:300]
        self._tokens.append(int(token_id))
        self._ok = self._ok and ok
        return self._ok

    def sync(self, index: int, token_id: int) -> bool:
        """Output token `index` is `token_id`: consume it unless it already was (the engine learns a
        token once early, to fill the next mask while the device runs, and once when it is read back);
        False when it was not allowed, or differs from the token consumed at that index."""
        if index < len(self._tokens):      # consumed already: a comparison (no llguidance call)
            return (self._bad_at is None or index < self._bad_at) and self._tokens[index] == int(token_id)
        if index > len(self._tokens):
            raise ValueError(f"token {index} skips {index - len(self._tokens)} the matcher has not seen")
        return self.consume(token_id)

    @property
    def error(self) -> str:
        if self._why:
            return self._why
        return "" if self._ok else "a token differs from the one consumed"

    @property
    def accepting(self) -> bool:
        return bool(self._m.is_accepting())
