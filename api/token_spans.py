"""Which sampled tokens spell a stretch of the generated text.

The engine's text lags its tokens (UTF-8 and stop strings are held back) and
the returned text is not all of the generated text (the end token, a stop
string, tool-call markup are cut out), so logprobs are attached by position:
`TokenSpans` maps each character of the generated text to the bytes of the
tokens it came from, and `tokens(start, end)` gives the tokens whose bytes
spell those characters. A token that reaches past either end is cut to its
bytes inside (its `token` and `bytes` shortened, its logprobs kept), so the
entries' bytes always concatenate to exactly the text.
"""
from __future__ import annotations

import bisect
import codecs
import dataclasses
from typing import Sequence

from aotx.engine.types import TokenLogprob


class TokenSpans:
    def __init__(self) -> None:
        self._tokens: list[TokenLogprob] = []
        self._starts: list[int] = []        # byte offset of each token
        self._size = 0                      # bytes so far
        self._chars = [0]                   # byte offset where each decoded character starts (+ end)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, lps: Sequence[TokenLogprob]) -> None:
        for lp in lps:
            self._tokens.append(lp)
            self._starts.append(self._size)
            self._size += len(lp.bytes)
            self._decode(lp.bytes, final=False)

    def close(self) -> None:
        """Generation ended: dangling bytes become U+FFFD, as the engine's text does."""
        self._decode(b"", final=True)

    def _decode(self, data: bytes, *, final: bool) -> None:
        pending = len(self._utf8.getstate()[0])
        chars = self._utf8.decode(data, final=final)
        if not chars:
            return
        consumed = pending + len(data) - len(self._utf8.getstate()[0])
        sizes = [len(c.encode()) for c in chars]
        if sum(sizes) != consumed:
            # U+FFFD stood for invalid bytes: the other characters keep their exact size,
            # the replacements share the rest
            bad = [k for k, c in enumerate(chars) if c == "\ufffd"]
            rest = consumed - sum(n for k, n in enumerate(sizes) if k not in bad)
            share, extra = divmod(max(rest, 0), max(len(bad), 1))
            for j, k in enumerate(bad):
                sizes[k] = share + (extra if j == len(bad) - 1 else 0)
        at = self._chars[-1]
        for n in sizes:
            at += n
            self._chars.append(at)

    def byte_at(self, char: int) -> int:
        """Byte offset of generated character `char` (clamped to what is known)."""
        return self._chars[max(0, min(char, len(self._chars) - 1))]

    def boundary(self, start: int, end: int) -> int:
        """The last character offset in [start, end] that is also a token boundary."""
        for k in range(end, start, -1):
            b = self.byte_at(k)
            i = bisect.bisect_right(self._starts, b) - 1
            if b == self._size or (i >= 0 and self._starts[i] == b):
                return k
        return start

    def tokens(self, start: int, end: int) -> tuple[TokenLogprob, ...]:
        """The tokens that spell generated characters [start, end), cut to them."""
        lo, hi = self.byte_at(start), self.byte_at(end)
        if lo >= hi:
            return ()
        first = bisect.bisect_right(self._starts, lo) - 1
        out = []
        for k in range(max(first, 0), len(self._tokens)):
            s = self._starts[k]
            if s >= hi:
                break
            lp = self._tokens[k]
            a, b = max(s, lo), min(s + len(lp.bytes), hi)
            if a >= b:
                continue
            if (a, b) != (s, s + len(lp.bytes)):
                cut = lp.bytes[a - s:b - s]
                lp = dataclasses.replace(lp, token=cut.decode("utf-8", "replace"), bytes=cut)
            out.append(lp)
        return tuple(out)
