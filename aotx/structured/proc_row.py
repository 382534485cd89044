"""The engine's side of a row whose llguidance matcher lives in a matcher process
(aotx.structured.matcher_pool): RowMatcher's interface for the engine (``consumed``, ``sync``,
``failed``, ``error``), with no llguidance call on the engine's threads.

It records every token the engine learns (the one-step-behind loop learns a step's token when it reads
that step back and sends it to the process with the next mask; the classic loop learns it in ``sync``)
and sends each once. A token is checked twice: here, against the bits of the mask it was sampled with
(one bit test, so a refused token ends the request when its step is read back, as with RowMatcher), and
by the process, whose llguidance consume says the same; a process's refusal or error arrives with the
next mask's reply and fails the row from then on. A row whose process died fails at once.
"""
from __future__ import annotations

import numpy as np


class ProcRowMatcher:
    def __init__(self, proc, key: int, tokens: list[int], constraint) -> None:
        self.proc = proc                # aotx.structured.matcher_pool.MatcherProcess
        self.key = key                  # its row key in that process
        self.constraint = constraint
        self.group = 0
        self._tokens = [int(t) for t in tokens]
        self._sent = 0                  # tokens sent to the process
        self._bad_at: int | None = None
        self._why = ""
        # (bits, row, tokens consumed before that fill): the last mask filled for it (set by the thread
        # that collects the mask, before the step's sampling can run)
        self.last: tuple | None = None

    @property
    def consumed(self) -> int:
        return len(self._tokens)

    @property
    def failed(self) -> bool:
        return self._bad_at is not None or self.proc.dead is not None

    @property
    def error(self) -> str:
        if self._why:
            return self._why
        return self.proc.dead or ""

    @property
    def end_error(self) -> str | None:
        """What the engine tells the request when this row fails for want of its process (else None:
        a refused token is "constraint violated")."""
        if self._bad_at is None and self.proc.dead is not None:
            return f"structured output unavailable: {self.proc.dead}"
        return None

    def unsent(self) -> list[int]:
        """The tokens the process has not had yet (marked sent)."""
        out = self._tokens[self._sent:]
        self._sent = len(self._tokens)
        return out

    def refuse(self, index: int, why: str) -> None:
        if self._bad_at is None or index < self._bad_at:
            self._bad_at, self._why = index, why

    def sync(self, index: int, token_id: int) -> bool:
        """RowMatcher.sync: output token `index` is `token_id`; False when it was not allowed, differs
        from the token learnt at that index, or the row's process failed."""
        token_id = int(token_id)
        n = len(self._tokens)
        if index < n:
            return not self.failed and (self._bad_at is None or index < self._bad_at) and self._tokens[index] == token_id
        if index > n:
            raise ValueError(f"token {index} skips {index - n} the matcher has not seen")
        last = self.last
        if last is not None and last[2] == index:      # the mask this token was sampled with
            bits, row = last[0], last[1]
            if not (int(bits[row, token_id >> 5]) >> (token_id & 31)) & 1:
                self.refuse(index, f"token {token_id} is not allowed")
        self._tokens.append(token_id)
        return not self.failed


def check_learnt(bits: np.ndarray, rows: list[int], tokens: list[int], matchers: list[ProcRowMatcher]) -> None:
    """Each token learnt from the device's ids against the bits it was sampled with (row rows[k] of
    `bits`, the last mask filled for matchers[k]): one numpy gather for a step's rows rather than a bit
    test a row; a token not allowed fails its row."""
    t = np.array(tokens, dtype=np.int64)
    allowed = (bits[np.array(rows), t >> 5] >> (t & 31).astype(np.uint32)) & 1
    if not allowed.all():
        for k in np.flatnonzero(allowed == 0).tolist():
            m = matchers[k]
            m.refuse(m.consumed - 1, f"token {tokens[k]} is not allowed")
