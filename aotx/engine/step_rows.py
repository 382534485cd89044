"""The parts of one step's batch as the runner builds it (aotx.engine.runner.ModelRunner.build): the head
(the leading one-token rows, the decode rows, as arrays) and the tail (prefill chunks and rows with prompt
logprobs, row by row), joined into a StepBatch by `cat`."""
from __future__ import annotations

import numpy as np

_I64 = np.empty(0, dtype=np.int64)
_I32 = np.empty(0, dtype=np.int32)


_SHARED: dict[tuple[str, int], np.ndarray] = {}


def shared(kind: str, n: int) -> np.ndarray:
    """A steady batch's constant int32 array of length n, made once and handed to every step that wants it
    ("count": 0..n-1, "hole": -1 each): launched steps share it, so nobody may write it (none does)."""
    a = _SHARED.get((kind, n))
    if a is None:
        if len(_SHARED) >= 64:
            _SHARED.clear()
        a = _SHARED[(kind, n)] = (np.arange(n, dtype=np.int32) if kind == "count"
                                  else np.full(n, -1, dtype=np.int32))
    return a


class PendingTokens:
    """seq_id -> the step's token index of its placeholder (its output token still on the device). The
    steady prefix's rows (row i: token i) become entries only when asked (a row with penalties), not each step."""
    __slots__ = ("_lead", "_rest")

    def __init__(self, lead: list[int] | None = None) -> None:
        self._lead = lead          # the steady prefix's seq_ids (row i's placeholder is token i), or None
        self._rest: dict[int, int] = {}

    def __setitem__(self, seq_id: int, token: int) -> None:
        self._rest[seq_id] = token

    def get(self, seq_id: int, default: int = -1) -> int:
        return self.as_dict().get(seq_id, default)

    def as_dict(self) -> dict[int, int]:
        if self._lead is not None:
            lead, self._lead = dict(zip(self._lead, range(len(self._lead)))), None
            lead.update(self._rest)
            self._rest = lead
        return self._rest

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PendingTokens):
            other = other.as_dict()
        return self.as_dict() == other

    __hash__ = None   # type: ignore[assignment]


class Head:
    """The leading one-token rows: token (-1: a placeholder), position, slot and previous-step row (-1:
    none) of each; the sampled ones (logits row, seq), and seq_id -> token index of each placeholder."""

    def __init__(self) -> None:
        self.k = 0
        self.tok, self.pos, self.rows, self.prev, self.logits_rows = _I32, _I64, _I64, _I32, _I32
        self.left = _I64      # each sampled row's tokens left to sample after this step (all sampled: each row's)
        self.seq_ids: list[int] = []    # each sampled row's seq_id
        self.sample: list = []
        self.pending_token = PendingTokens()
        self.logprobs = False
        self.placeholders = False
        self.carried = 0      # the leading rows that are the step before's rows 0..carried-1, each sampled by it

    def fast(self, k: int, pos: np.ndarray, rows: np.ndarray, left: np.ndarray, seq_ids: list[int], sample: list,
             logprobs: bool, prev: np.ndarray | None) -> None:
        """The steady prefix: k rows, each sampled by the step before (as its row prev[i], or i), fed from it."""
        self.k = k
        self.tok = shared("hole", k)
        self.pos, self.rows, self.left, self.seq_ids = pos, rows, left, seq_ids
        self.logits_rows = shared("count", k)
        self.prev = shared("count", k) if prev is None else prev.astype(np.int32)   # (never written)
        self.carried = k if prev is None else 0
        self.sample = list(sample)
        self.pending_token = PendingTokens(seq_ids)
        self.logprobs = logprobs
        self.placeholders = k > 0

    def more(self, tokens: list[int], positions: list[int], slots: list[int], prev: list[int],
             logits_rows: list[int], logprobs: bool, left: list[int], seq_ids: list[int]) -> None:
        """Rows after the prefix, looked at one by one (`left`, `seq_ids`: each sampled one's tokens left to
        sample after this step, and its seq_id)."""
        self.k += len(tokens)
        self.seq_ids = self.seq_ids + seq_ids
        self.left = np.concatenate([self.left, np.array(left, dtype=np.int64)])
        prev_a = np.array(prev, dtype=np.int32)
        self.tok = np.concatenate([self.tok, np.array(tokens, dtype=np.int32)])
        self.pos = np.concatenate([self.pos, np.array(positions, dtype=np.int64)])
        self.rows = np.concatenate([self.rows, np.array(slots, dtype=np.int64)])
        self.prev = np.concatenate([self.prev, prev_a])
        self.logits_rows = np.concatenate([self.logits_rows, np.array(logits_rows, dtype=np.int32)])
        self.logprobs = self.logprobs or logprobs
        self.placeholders = self.placeholders or bool((prev_a >= 0).any())

    def all_sampled(self) -> bool:
        """Every row samples (then row i's sampled id is row i of the step's ids)."""
        return len(self.sample) == self.k


class Tail:
    """The rows after the head, in lists (positions and KV slots as one array a row)."""

    def __init__(self, base: int, rows_base: int) -> None:
        self.base = base              # tokens before the tail (the head's)
        self.rows_base = rows_base    # logits rows before the tail (the head's sampled rows)
        self.tokens: list[int] = []
        self.positions: list[np.ndarray] = []
        self.slot_map: list[np.ndarray] = []
        self.slots: list[int] = []
        self.query_start: list[int] = []
        self.context_lens: list[int] = []
        self.logits_rows: list[int] = []
        self.sample: list = []
        self.prompt: list = []
        self.ph_token: list[int] = []
        self.ph_row: list[int] = []
        self.logprobs = False


def cat(head: np.ndarray, tail: list, dtype) -> np.ndarray:
    """A head array (a fresh one: returned as it is when it has `dtype` and the tail is empty) and the tail's
    list (of numbers, or of arrays) as one array of `dtype`."""
    if not tail:
        return head.astype(dtype, copy=False)
    rest = np.concatenate(tail) if isinstance(tail[0], np.ndarray) else np.array(tail, dtype=np.int64)
    return np.concatenate([head, rest]).astype(dtype, copy=False)
