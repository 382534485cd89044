"""The token mask of one step: the bitmask of every sampled row whose request has a constraint.

A constrained row's matcher must have consumed every token sampled before this one; a token still on the
device (the engine runs one step behind) is learnt late: the mask reads the step before's ids, feeds them to
the matchers and fills the bitmasks. Rows without a constraint are not in the mask; a step without constrained
rows has no mask (None).

Where it runs (aotx.engine.mask_worker): in the one-step-behind loop step k's mask is ``deferred``: the launcher
enqueues step k's forward and returns; its sampling is enqueued by the thread that fills the mask (``when_ready``),
or when the launcher needs it (kernels/cuda/overlap.py), or at once behind a gate that the fill opens after writing
the bits into page-locked memory (``into``; kernels/cuda/mask_gate.py). The mask worker feeds step k-1's tokens
to the matchers (``consume``: one GIL-released llguidance call, its arguments built before the read-back by
``prepare``; on the engine thread with ``AOTX_MASK_CONSUME=engine``) and fills the bitmasks (one llguidance call)
while the GPU runs step k's forward. Without a worker (the classic loop, ``AOTX_MASK_WORKER=0``) the launcher
calls the mask itself, between the forward and the sampling, on the engine thread.

Matchers are touched by one thread at a time (the worker, one mask at a time, in launch order); the engine
thread's check of the tokens it reads back never calls llguidance: a token the worker consumes is checked
against the bit that let it through. The runner chains the masks (``step_mask``'s `last`): a steady step's mask
takes the launch before's rows as they are (``following``), and a read-back is checked for the step at once
(``verify``, aotx.engine.mask_check), each row's matcher told its marks only where that check cannot pass.
"""
from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence

import numpy as np

from aotx.engine import mask_check
from aotx.engine.latch import Latch as _Latch
from aotx.engine.mask_plan import MaskPlan as _Plan
from aotx.engine.sequence import Sequence as Seq
from kernels.token_mask import TokenMask, mask_words

log = logging.getLogger(__name__)


class MaskOutOfStep(RuntimeError):
    """A constrained row's matcher has not seen every token sampled before this step."""


class LateMask:
    """The mask of one launch, computed once, by whoever runs it first (see the module docstring)."""

    def __init__(self, sampled: Sequence[Seq], previous, last=False) -> None:
        # rows: the sampled rows with a constraint; for each, as columns: its sequence, its matcher, the row of
        # the previous launch's ids holding its pending token or -1, and the output index of that token / the
        # tokens the matcher must have consumed; taken now, on the engine thread (one pass: it runs every step)
        self.rows: list[int] = []
        self._matchers: list = []     # each row's matcher
        self._seq_col: list = []
        self._id_col: list[int] = []
        self._index_col: list[int] = []
        rows, matchers, seqs = self.rows.append, self._matchers.append, self._seq_col.append
        ids, index = self._id_col.append, self._index_col.append
        vocab, last_c, pending = 0, None, 0
        for j, seq in enumerate(sampled):
            m = seq.matcher
            if m is None:
                continue
            rows(j)
            matchers(m)
            seqs(seq)
            if seq.pending:
                ids(seq.pending_row)
                index(len(seq.output_ids) + seq.pending - 1)
                pending += 1
            else:
                ids(-1)
                index(len(seq.output_ids))
            constraint = seq.params.constraint
            if constraint is not last_c:
                last_c, vocab = constraint, max(vocab, int(constraint.vocab_size))
        self._start(sampled, previous, last, mask_words(vocab), pending)

    def _start(self, sampled, previous, last, words: int, pending: int) -> None:
        self._sampled_list = sampled  # (the launch's sampled rows: the next launch's mask compares, `following`)
        self._pending_n = pending     # rows with a token pending in `previous`
        self._previous = previous     # the previous launch's handle (its ids()), when a token is pending
        # `last`: the launch before's mask (or None) where the runner chains them: told at ``defer`` that this one
        # consumes its tokens (``consumer``; its read-back then ``verify``s the step); False: rows told at ``defer``
        self._chained = last is not False
        self._before = last if last is not False else None   # (until ``defer`` or ``run``: no chain of masks kept)
        if self._before is not None:
            self._before._before = None
        self.consumer = None          # the next launch's mask, whose worker consumes this one's tokens (chained)
        self._bits_ix = None          # (verify: 0..rows-1, and the bytes of as many ones)
        self._ok_seen = [None]        # (verify: mask_check.all_ok's count, shared by the masks `following` it)
        self.words = words
        self.flat: memoryview | None = None   # the bits once written (RowMatcher.sync, allows); None: `into`'s reused
        self._out: np.ndarray | None = None   # where the bits go (into): else a fresh array
        self.deferred = False         # the mask worker fills it: the launcher may sample later
        self.worker_consumes = False  # ... and consumes the pending tokens first (defer)
        self._bits_gone = False       # `into`'s memory was given to a later mask (allows)
        self._consumed = _Latch()
        self.thread = ""              # the thread that filled it (tests, benches)
        self._lock = threading.Lock()
        self._claimed = False
        self._ok: list[bool] | None = None   # per row, after consume: its tokens were allowed
        self._done = _Latch()
        self._mask: TokenMask | None = None
        self._error: BaseException | None = None
        self._on_ready: list = []     # when_ready's callbacks, called by the thread that fills it
        self._plan: _Plan | None = None   # what llguidance is handed (prepare); False: not llguidance's rows
        self._fast = False            # every row's matcher is a RowMatcher (defer)

    @classmethod
    def following(cls, last: "LateMask", previous) -> "LateMask":
        """The mask of a launch whose sampled rows are `last`'s launch's, in the same order (the steady
        decode step), `previous` being that launch: each row's token is pending at its own row of it, one
        output index on from `last`'s (or at the same one, where `last` had none pending). No row is read."""
        mask = cls.__new__(cls)
        mask.rows, mask._matchers, mask._seq_col = last.rows, last._matchers, last._seq_col
        mask._id_col = last.rows      # (pending_row: the row's place in `previous`, the same as in this launch)
        if last._pending_n == len(last.rows):
            mask._index_col = [i + 1 for i in last._index_col]
        else:
            mask._index_col = [i + 1 if r >= 0 else i for r, i in zip(last._id_col, last._index_col)]
        mask._start(last._sampled_list, previous, last, last.words, len(last.rows))
        mask._bits_ix, mask._ok_seen = last._bits_ix, last._ok_seen
        return mask

    @property
    def _seqs(self) -> list[tuple]:
        """The columns a row at a time: (seq, id row or -1, output index) (the general path, tests)."""
        return list(zip(self._seq_col, self._id_col, self._index_col))

    @property
    def previous(self):
        return self._previous

    @property
    def reads_previous(self) -> bool:
        """A row's pending token is in the previous launch's ids (consume reads them)."""
        return self._pending_n > 0

    def defer(self, worker_consumes: bool = False) -> None:
        """The mask worker computes it: the launcher may sample later. With `worker_consumes` the worker also
        consumes the rows' pending tokens, first (MaskWorker.read_back hands it over without doing it on the
        engine thread), and the engine thread checks each token it reads back against the bit of the mask that
        let it through, never calling llguidance: chained, the mask before learns that this one consumes its
        rows' tokens (``consumer``: its ``verify``); else each row's matcher is told so here (RowMatcher
        .expect). Only where every row's matcher takes that protocol (not the benches' probes)."""
        self.deferred = True
        before, self._before = self._before, None
        if not worker_consumes:
            return
        matchers = self._matchers
        if before is not None and before._matchers is matchers and before.worker_consumes:
            self._fast = before._fast       # (the same matchers took it at the launch before)
        else:
            kinds = set(map(type, matchers))
            self._fast = len(kinds) == 1 and getattr(next(iter(kinds)), "expect_rows", None) is not None
            if not self._fast and not all(hasattr(m, "expect") for m in matchers):
                return
        if before is not None:      # (chained: the mask before checks its tokens against what this one consumes)
            before.consumer = self
        if self._fast:              # chained: each row told at the read-back only where needed (verify); else
            if not self._chained:   # RowMatcher's loop below without a call a row
                matchers[0].expect_rows(self, matchers, self._seqs)
        else:
            self._chained = False   # (another kind of matcher: told here, a row at a time)
            for j, (m, (_, row, index)) in enumerate(zip(matchers, self._seqs)):
                if row >= 0:
                    m.expect(self, j, index + 1, True)
                else:
                    m.expect(self, j, index, False)
        self.worker_consumes = True

    def verify(self, ids, results=None) -> bool:
        """At the read-back of this mask's launch, on the engine thread (`ids`: that launch's sampled ids;
        `results`: its rows with more to report): True where its rows' tokens are checked for the step at
        once, else False, each row's matcher then told what its own ``sync`` needs (aotx.engine.mask_check)."""
        return mask_check.verify(self, ids, results)

    def allows(self, row: int, token: int) -> bool | None:
        """Whether row `row`'s bits allow `token` (the sampler drew it through them); None where the
        mask is not computed, failed, or its memory holds a later mask's bits now."""
        words = self.flat                 # (set once the bits are written: after the fill)
        if words is None or self._bits_gone:
            return None
        if not 0 <= token < 32 * self.words:
            return False
        return bool((words[row * self.words + (token >> 5)] >> (token & 31)) & 1)

    def wait_consumed(self) -> None:
        """Until this mask's thread has consumed the rows' pending tokens (or failed to)."""
        self._consumed.wait()

    def into(self, bits: np.ndarray) -> None:
        """Fill into `bits` (uint32 [len(rows), words], C-contiguous; CUDA's launcher gives page-locked
        memory that its stream copies once the mask is ready: kernels/cuda/mask_gate.py). Before it runs.
        The mask that had that memory before no longer answers ``allows``."""
        if bits.dtype != np.uint32 or bits.shape != (len(self.rows), self.words) or not bits.flags["C_CONTIGUOUS"]:
            raise ValueError(f"a mask's bits are uint32 [{len(self.rows)}, {self.words}], C-contiguous")
        address = bits.ctypes.data
        before = _HOLDERS.get(address)
        if before is not None and before is not self:
            before._bits_gone = True
            before.flat = None
        _HOLDERS[address] = self
        self._out = bits

    def ready(self) -> bool:
        """Computed (calling it will not wait)."""
        return self._done.is_set()

    def when_ready(self, fn) -> None:
        """Call `fn()` once the mask is computed, on the thread that computes it (the mask worker: the
        CUDA launcher enqueues the step's sampling there); at once, here, if it is computed already."""
        with self._lock:
            if not self._done.is_set():
                self._on_ready.append(fn)
                return
        fn()

    def __call__(self) -> TokenMask:
        """The mask: computed here unless the worker has it (then waited for)."""
        if not self.deferred:
            self.run()
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._mask is not None
        return self._mask

    def consume(self) -> None:
        """Feed the previous launch's tokens to the rows' matchers (once; by the thread that owns them)."""
        if self._ok is not None or self._error is not None:
            return
        try:
            self._ok = self._consume()
        except BaseException as exc:  # handed to whoever samples with it (the engine fails that step)
            self._error = exc
        finally:
            self._consumed.set()

    def run(self) -> None:
        """Consume (if not done yet) and fill; the result is what __call__ returns."""
        with self._lock:
            if self._claimed:
                return
            self._claimed = True
        self._before = None
        self.thread = threading.current_thread().name
        try:
            self.consume()
            if self._error is None:
                assert self._ok is not None
                mask = self._fill(self._ok)
                flat = memoryview(np.ascontiguousarray(mask.bits, dtype=np.uint32).reshape(-1))
                self._mask = mask
                if not self._bits_gone:     # (into gave its memory to a later mask: no longer answers)
                    self.flat = flat
        except BaseException as exc:  # handed to whoever samples with it (the engine fails that step)
            self._error = exc
        finally:
            self._consumed.set()
            with self._lock:
                self._done.set()
                ready, self._on_ready = self._on_ready, []
            for fn in ready:
                try:
                    fn()
                except Exception:  # (CUDA's own hands any error to its step's ids(): it does not raise)
                    log.exception("a token mask's ready callback failed (rows %s)", self.rows)

    def prepare(self) -> None:
        """Build what the consume and the fill hand llguidance (``_Plan``), once: the mask worker does it
        when the mask is handed over at its launch, while it would wait for the read-back anyway
        (MaskWorker.handed), so that the chain from the read-back to the opened gate is the two
        llguidance calls and little Python around them; else the consume does it. Rows whose matchers
        are not llguidance's (the benches' probes) take the general path (``_Plan`` False)."""
        if self._plan is None:
            try:
                self._plan = _Plan.build(self._matchers, self._id_col, self._index_col, self.rows,
                                         _LAST[0]()) or False
                if self._plan:
                    _LAST[0] = weakref.ref(self._plan)
            except Exception:   # (never seen: lists of what the rows hold) the consume takes the general path
                log.exception("a token mask's plan could not be built (rows %s)", self.rows)
                self._plan = False

    def _consume(self) -> list[bool]:
        batch = _batch()
        self.prepare()
        plan = self._plan
        if not plan:
            return self._consume_rows(batch)
        # (the matchers' consumed counts, oks and token records read without a Python call a row: the plan
        # holds their token lists, RowMatcher's, which never change identity)
        if plan.idle and list(map(len, plan.idle_tokens)) != plan.idle_index:
            self._out_of_step()
        ok = None
        if plan.pending:
            if self._previous is None:
                raise MaskOutOfStep(f"sequence {self._seq_col[plan.pending[0]].seq_id}: a pending token and no "
                                    "step to read it from")
            tokens = self._previous.ids()[plan.id_rows].tolist()
            pm = plan.pending_matchers
            if list(map(len, plan.pending_tokens)) == plan.pending_index:    # (each at its token: the worker's case)
                batch.consume_rows(pm, plan.pending_lls, tokens, plan.pending_tokens)   # (one token each)
            else:       # a row has it already: sync compares
                ok = [True] * len(self.rows)
                for k, good in zip(plan.pending, batch.sync_rows(pm, plan.pending_index, tokens)):
                    ok[k] = good
                self._out_of_step()
        # (not m.failed: each row's flag read only where a row failed since the last step that read them)
        oks = ([True] * len(plan.matchers) if mask_check.all_ok(plan.matchers, plan.ok_seen)
               else list(map(mask_check.OK, plan.matchers)))
        if ok is None:
            return oks
        return [good and o for good, o in zip(ok, oks)]

    def _consume_rows(self, batch) -> list[bool]:
        """The general path: any matcher with RowMatcher's interface."""
        seqs = self._seqs
        pending = [k for k, (_, row, _) in enumerate(seqs) if row >= 0]
        ok = [True] * len(seqs)
        if pending:
            if self._previous is None:
                raise MaskOutOfStep(f"sequence {seqs[pending[0]][0].seq_id}: a pending token and no "
                                    "step to read it from")
            ids = self._previous.ids()
            got = batch.sync_rows([seqs[k][0].matcher for k in pending], [seqs[k][2] for k in pending],
                                  [int(ids[seqs[k][1]]) for k in pending])
            for k, good in zip(pending, got):
                ok[k] = good
        self._out_of_step()
        for k, (seq, _, _) in enumerate(seqs):
            ok[k] = ok[k] and not seq.matcher.failed
        return ok

    def _out_of_step(self) -> None:
        """Raise MaskOutOfStep for the first row whose matcher has not consumed exactly the tokens before
        this step's."""
        for seq, row, index in self._seqs:
            known = index + 1 if row >= 0 else index
            if seq.matcher.consumed != known:
                raise MaskOutOfStep(f"sequence {seq.seq_id}: matcher at {seq.matcher.consumed} tokens, "
                                    f"output at {known}")

    def _fill(self, ok: list[bool]) -> TokenMask:
        batch = _batch()
        # a refused token ends the request when its step is read back: its row here is never used
        bits = self._out if self._out is not None else np.empty((len(self.rows), self.words), dtype=np.uint32)
        plan = self._plan
        every = all(ok)
        if plan:
            pairs = plan.pairs if every else [(ll, k) for ll, k in plan.pairs if ok[k]]
            if pairs:
                batch.fill_pairs(pairs, bits, plan.lls if every else [ll for ll, _ in pairs])
        else:
            fill = [k for k in range(len(self.rows)) if ok[k]]
            if fill:
                sub = bits if len(fill) == len(self.rows) else np.empty((len(fill), bits.shape[1]), np.uint32)
                batch.fill_rows([self._matchers[k] for k in fill], sub)
                if sub is not bits:
                    bits[fill] = sub
        if not every:
            bits[[k for k in range(len(self.rows)) if not ok[k]]] = np.uint32(0xFFFFFFFF)
        return TokenMask(plan.rows if plan else np.array(self.rows, dtype=np.int32), bits)


_BATCH: list = []


def _batch():
    """aotx.structured.batch, imported once a request has a constraint: engine runs without one (the GPU
    benches on an image that lacks the llguidance wheel) never load it."""
    if not _BATCH:
        from aotx.structured import batch
        _BATCH.append(batch)
    return _BATCH[0]


# the plan built last, while its mask lives (LateMask.prepare: the mask worker builds them one at a time, in
# launch order): the next one shares its lists where its rows are the same
_LAST: list = [lambda: None]


# the mask whose bits are in a given memory (by address: `into`), so that an earlier one stops answering
_HOLDERS: "weakref.WeakValueDictionary[int, LateMask]" = weakref.WeakValueDictionary()


def step_mask(sampled: Sequence[Seq], previous=None, last=False) -> LateMask | None:
    """The launch's mask (called by the launcher, or run by the mask worker), or None when no sampled
    row is constrained. `previous`: the handle of the launch before (tokens still pending on the device).
    `last`: where the runner chains the masks, the launch before's mask (or None); a launch whose sampled
    rows are that launch's, in the same order (the same sequences: Sequence compares by identity), takes its
    mask's rows as they are (``LateMask.following``)."""
    if (last is not None and last is not False and previous is not None and type(last) is LateMask
            and last._sampled_list == sampled):
        return LateMask.following(last, previous)
    if not any(seq.matcher is not None for seq in sampled):
        return None
    return LateMask(sampled, previous, last)
