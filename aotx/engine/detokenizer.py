"""Incremental detokenization: token bytes in, safe text out.

Output tokens are accumulated as BYTES (a byte-level BPE token may hold part
of a UTF-8 character), decoded incrementally so only complete characters are
released, and held back while the tail could still become a stop string.
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Protocol


class TokenBytes(Protocol):
    def token_bytes(self, token_id: int) -> bytes: ...


@dataclass(frozen=True)
class DetokStep:
    text: str                         # newly releasable text (may be "")
    finish_reason: str | None = None  # "stop" when a stop token/string ended it
    stop_sequence: str | None = None  # the matched stop string


class Detokenizer:
    """One request's output text. `add` per sampled token, `flush` at the end."""

    def __init__(self, tokenizer: TokenBytes, stop: tuple[str, ...] = (),
                 stop_token_ids: frozenset[int] | set[int] = frozenset(),
                 silent_ids: frozenset[int] = frozenset(), texts: dict[int, str | None] | None = None) -> None:
        self._tok = tokenizer
        # token id -> its text when its bytes are whole UTF-8, else None (shared by an engine's requests);
        # with nothing held in the decoder such a token's text is exactly what the decoder would release
        self._texts = texts if texts is not None else {}
        self.clean = True     # the decoder holds no partial character
        self._stops = tuple(s for s in stop if s)
        self._stop_ids = frozenset(stop_token_ids)
        self._silent = silent_ids     # tokens that neither end the output nor add text (EOS under ignore_eos)
        # the engine's short path (aotx.engine.step_output): with no stop string, a token not in `special`
        # whose text is cached as whole while `clean` is released as it is (appended to `parts`), as `plain` would
        self.quick = not self._stops
        self.special = self._stop_ids | frozenset(silent_ids)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""       # decoded text not yet released (possible stop prefix)
        self.parts: list[str] = []    # everything released so far (joined on demand: `text`)
        self.done = False

    @property
    def text(self) -> str:
        """Everything released so far."""
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def add(self, token_id: int) -> DetokStep:
        """Feed one sampled token. After a finishing step, further calls raise."""
        if self.done:
            raise RuntimeError("detokenizer already finished")
        if token_id in self._stop_ids:
            return self._final("stop")
        if token_id in self._silent:
            return DetokStep("")
        piece = self._decoder.decode(self._tok.token_bytes(token_id), final=False)
        self.clean = not self._decoder.getstate()[0]
        if not self._stops:           # the common case: nothing to hold back
            if piece:
                self.parts.append(piece)
            return DetokStep(piece)
        self._held += piece
        hit = self._find_stop(self._held)
        if hit is not None:
            index, stop = hit
            return self._finish(self._held[:index], "stop", stop)
        keep = self._stop_prefix_len(self._held)
        out, self._held = self._held[: len(self._held) - keep], self._held[len(self._held) - keep:]
        if out:
            self.parts.append(out)
        return DetokStep(out)

    def plain(self, token_id: int) -> str | None:
        """A token that can neither end the output nor hold text back (no stop strings; not a stop or
        a silent id): the text it releases, as ``add`` would, without a DetokStep. Otherwise None,
        nothing done: call ``add``."""
        if self._stops or self.done or token_id in self._stop_ids or token_id in self._silent:
            return None
        if self.clean:
            piece = self._texts.get(token_id, False)
            if piece is False:
                piece = self._texts[token_id] = _whole_text(self._tok.token_bytes(token_id))
            if piece is not None:
                if piece:
                    self.parts.append(piece)
                return piece
        piece = self._decoder.decode(self._tok.token_bytes(token_id), False)
        self.clean = not self._decoder.getstate()[0]
        if piece:
            self.parts.append(piece)
        return piece

    def flush(self) -> DetokStep:
        """The sequence ended for another reason: release what is left.

        Undecodable leftover bytes come out as U+FFFD; a stop string completed
        by that still cuts the text (and reports "stop").
        """
        if self.done:
            return DetokStep("")
        return self._final(None)

    # -- internals --------------------------------------------------------
    def _finish(self, text: str, reason: str | None, stop: str | None) -> DetokStep:
        self._held = ""
        if text:
            self.parts.append(text)
        self.done = True
        return DetokStep(text, reason, stop)

    def _final(self, reason: str | None) -> DetokStep:
        self._held += self._decoder.decode(b"", final=True)
        hit = self._find_stop(self._held)
        if hit is not None:
            return self._finish(self._held[: hit[0]], "stop", hit[1])
        return self._finish(self._held, reason, None)

    def _find_stop(self, text: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for stop in self._stops:
            i = text.find(stop)
            if i >= 0 and (best is None or i < best[0]):
                best = (i, stop)
        return best

    def _stop_prefix_len(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop."""
        longest = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:n]):
                    longest = n
                    break
        return longest


def _whole_text(data: bytes) -> str | None:
    """`data` as text when it is whole, valid UTF-8; None when a character is split or invalid."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
