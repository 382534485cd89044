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

    def prepare(self, lexers: int | None = None) -> None:
        """Build the prototypes up to `lexers` (default: aotx.structured.batch.lexers()), each from the
        grammar, so each has its own lexer. The compiler calls it once, where it compiles (off the event
        loop: api.structured, aotx.engine_service); llguidance releases the GIL while it builds (~0.5 ms,
        up to seconds for a large schema). ``start`` never builds one beside the first."""
        from aotx.structured.batch import lexers as default_lexers
        want = max(1, lexers if lexers is not None else default_lexers())
        while True:
            with self._lock:
                if len(self._proto) >= want:
                    return
            built = llguidance.LLMatcher(self.tokenizer, self.grammar, log_level=0)   # (outside the lock)
            with self._lock:
                if len(self._proto) < want:
                    self._proto.append(built)

    @property
    def prototypes(self) -> int:
        """How many prototypes (lexers) its sequences are spread over."""
        with self._lock:
            return len(self._proto)

    def start(self) -> RowMatcher:
        """A matcher at the start of the grammar. llguidance's copy (``deep_copy``: its Matcher's clone,
        not deep_clone) shares the original's lexer -- its DFA cache, warm for every copy -- behind one
        mutex that a mask computation holds throughout, so the rows of one prototype fill one at a time
        whatever the executor's threads. Sequences are spread round-robin over the prototypes that
        ``prepare`` built (the compiler's, at compile time), each with its own lexer:
        aotx.structured.batch fills each prototype's rows on one thread. It builds none itself, except
        the first for a constraint nobody prepared (~2 µs a copy against ~0.5 ms a build)."""
        with self._lock:
            if not self._proto:
                self._proto.append(llguidance.LLMatcher(self.tokenizer, self.grammar, log_level=0))
            group = self._starts[0] % len(self._proto)
            self._starts[0] += 1
            proto = self._proto[group]
        return RowMatcher(proto.deep_copy(), group, self)


class RowMatcher:
    # how many rows have failed so far, of every matcher (counted after the row's own flag: ``consumed_as``), so
    # that a step's check of its rows' flags is made only where a row failed anywhere since (aotx.engine.mask_check)
    failures = 0

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
        # set on the engine thread by the masks of the mask worker (aotx.engine.masks.LateMask.defer):
        # (mask, its row, the output index whose token that mask let through) of the last two masks,
        # and (mask, output index) of the one that consumes a token on the worker
        self._sampled: tuple = (None, None)
        self._consumer: tuple | None = None

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

    @staticmethod
    def consumed_par(matchers: list["RowMatcher"], tokens: list[int], accepted: list[bool],
                     records: list[list[int]] | None = None) -> None:
        """matchers[j] has consumed tokens[j] (an int) with accepted[j], what a batch consume of their
        llguidance matchers returned (aotx.structured.batch.consume_rows): ``consume`` without its
        llguidance call (the batch consume is the one ``consume_token`` makes; it leaves a refused row
        in its error state). `records`: the matchers' token lists (``_tokens``), where the caller has
        them (aotx.engine.masks' plan): then an all-accepted step is recorded without a Python call a row."""
        if all(accepted):
            if records is not None:
                any(map(list.append, records, tokens))   # (append returns None: any() runs them all)
                return
            for m, t in zip(matchers, tokens):
                m._tokens.append(t)     # (a failed row stays failed: consumed_as with True)
            return
        for m, t, good in zip(matchers, tokens, accepted):
            if good:
                m._tokens.append(t)
            else:
                m.consumed_as(t, False)

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
        if not ok:
            RowMatcher.failures += 1
        return self._ok

    def expect(self, mask, row: int, index: int, consumes: bool) -> None:
        """`mask` (row `row` of its bits) is the next-token mask of output token `index`; with
        `consumes`, that mask's thread (the mask worker) consumes token `index - 1` before it fills.
        Called on the engine thread when the mask is handed to the worker (LateMask.defer)."""
        self._sampled = (self._sampled[1], (mask, row, index))
        if consumes:
            self._consumer = (mask, index - 1)

    @staticmethod
    def expect_rows(mask, matchers: list["RowMatcher"], seqs: list[tuple]) -> None:
        """``expect`` for each row j of `mask` (LateMask.defer; `seqs[j]`: (seq, the row of its pending token
        in the previous launch's ids or -1, the output index of that token / of the next one)): the mask
        worker consumes every pending token."""
        for j, (m, (_, row, index)) in enumerate(zip(matchers, seqs)):
            if row >= 0:
                m._sampled = (m._sampled[1], (mask, j, index + 1))
                m._consumer = (mask, index)
            else:
                m._sampled = (m._sampled[1], (mask, j, index))

    def mark(self, mask, row: int, index: int, consumer: tuple | None) -> None:
        """What ``expect`` tells, told at the read-back of output token `index` instead (chained masks:
        LateMask.verify, where its step-wide check cannot pass): row `row` of `mask` let that token through,
        and `consumer` (a mask, `index`) consumes it on the worker, or None: nobody does (``sync`` does)."""
        self._sampled = (None, (mask, row, index))
        self._consumer = consumer

    def sync(self, index: int, token_id: int) -> bool:
        """Output token `index` is `token_id`: consume it unless it already was (the engine learns a
        token once early, to fill the next mask while the device runs, and once when it is read back);
        False when it was not allowed, or differs from the token consumed at that index. A token that
        the mask worker consumes (``expect``) is not consumed here: it is checked against the bit of
        the mask that let it through (a refusal the worker's consume finds later still fails the row,
        at its next token at the latest), or, where that mask's bits are gone, after the worker's
        consume."""
        consumer = self._consumer
        if consumer is not None and consumer[1] == index:
            # the mask's own bit first, also where the worker has consumed the token already: its
            # consume (llguidance's) may accept a token that mask left out (another tokenisation of
            # forced bytes), and this check must not depend on which thread came first. (The common
            # case of every constrained row's read-back, each step: as few steps as it takes.)
            tokens = self._tokens
            n = len(tokens)
            if index > n:
                raise ValueError(f"token {index} skips {index - n} the matcher has not seen")
            mark, later = self._sampled     # the mask that let token `index` through
            if mark is None or mark[2] != index:
                mark = later
            if mark is not None and mark[2] == index:
                mask = mark[0]
                flat = mask.flat            # (its bits once written and until a later mask has their memory)
                if flat is not None:
                    tok, words = int(token_id), mask.words
                    if not (0 <= tok < 32 * words and (flat[mark[1] * words + (tok >> 5)] >> (tok & 31)) & 1):
                        return False
                    if index == n:
                        return self._bad_at is None
                    bad = self._bad_at
                    return (bad is None or index < bad) and tokens[index] == tok
            if index == n:
                consumer[0].wait_consumed()
                if index >= len(tokens):
                    return False        # its mask failed before it consumed (that step fails too)
            return (self._bad_at is None or index < self._bad_at) and tokens[index] == int(token_id)
        n = len(self._tokens)
        if index > n:
            raise ValueError(f"token {index} skips {index - n} the matcher has not seen")
        if index < n:      # consumed already: a comparison (no llguidance call)
            return (self._bad_at is None or index < self._bad_at) and self._tokens[index] == int(token_id)
        return self.consume(token_id)

    @property
    def error(self) -> str:
        if self._why:
            return self._why
        return "" if self._ok else "a token differs from the one consumed"

    @property
    def accepting(self) -> bool:
        return bool(self._m.is_accepting())
