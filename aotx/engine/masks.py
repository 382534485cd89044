"""The token mask of one step: the bitmask of every sampled row whose request has a constraint.

A constrained row's matcher must have consumed every token sampled before this one. A token of the
step still on the device (the engine runs one step behind) is learnt late: the mask reads the step
before's ids, feeds them to the matchers and fills the bitmasks. Rows without a constraint are not
in the mask and cost nothing; a step without constrained rows has no mask at all (None).

Where it runs (aotx.engine.mask_worker): in the one-step-behind loop the mask of step k is
``deferred``: the launcher enqueues step k's forward and returns; step k's sampling is enqueued by the
thread that fills the mask, right after the fill (``when_ready``: CUDA's launcher registers it), or else
when the launcher needs it (at the next launch, before that launch's forward, or when it reads step k's
ids: kernels/cuda/overlap.py). Where CUDA's stream can wait on host memory, step k's sampling is enqueued
at its launch behind a gate, and the fill writes the bits into the page-locked memory that the stream
copies once the gate opens (``into``, ``when_ready``: kernels/cuda/mask_gate.py). When the engine thread reads step k-1 back it hands the mask to the mask worker, which feeds step
k-1's tokens to the matchers (``consume``: one llguidance call for the rows, the GIL released, with what it
hands llguidance built before the read-back: ``prepare``; on the engine thread before
the hand-over with ``AOTX_MASK_CONSUME=engine``) and fills the bitmasks (one llguidance call, its own
threads, the GIL released) while the GPU computes step k's forward and the engine thread delivers step
k-1, schedules and builds step k+1. Without a worker (the classic loop, the inline launcher,
``AOTX_MASK_WORKER=0``) the launcher calls the mask itself, after the forward is enqueued and before the
sampling, on the engine thread.

Matchers are touched by one thread at a time: the worker consumes and fills one mask at a time, in
launch order (or the thread computing the mask, when it is not deferred); meanwhile the engine thread's
own check of each token it reads back never calls llguidance: a token the worker consumes is checked
against the bit of the mask that let it through (``defer``, ``allows``: RowMatcher.sync), one consumed
already is a comparison.
"""
from __future__ import annotations

import logging
import operator
import threading
import weakref
from collections.abc import Sequence

import numpy as np

from aotx.engine.sequence import Sequence as Seq
from aotx.engine.mask_plan import MaskPlan as _Plan
from kernels.token_mask import TokenMask, mask_words

log = logging.getLogger(__name__)


class MaskOutOfStep(RuntimeError):
    """A constrained row's matcher has not seen every token sampled before this step."""


class _Latch:
    """A one-shot threading.Event (set once, never cleared; wait without a timeout), built in a tenth of its
    instructions: a LateMask makes two a step on the engine thread (threading.Event builds a Condition and
    its bound methods). The one setter takes the token (list.pop: atomic under the GIL) and releases the lock
    that waiters acquire and release again."""
    __slots__ = ("_token", "_lock")

    def __init__(self) -> None:
        self._token = [True]
        self._lock = threading.Lock()
        self._lock.acquire()

    def is_set(self) -> bool:
        return not self._token

    def set(self) -> None:
        try:
            self._token.pop()
        except IndexError:      # (set already)
            return
        self._lock.release()

    def wait(self) -> None:
        if self._token:
            self._lock.acquire()
            self._lock.release()


class LateMask:
    """The mask of one launch, computed once, by whoever runs it first (see the module docstring)."""

    def __init__(self, sampled: Sequence[Seq], previous) -> None:
        # rows: the sampled rows with a constraint; _seqs, for each: (seq, the row of the previous launch's
        # ids holding its pending token or -1, the output index of that token / the tokens the matcher
        # must have consumed), taken now, on the engine thread (one pass: it runs every step)
        self.rows: list[int] = []
        self._seqs: list[tuple] = []
        self._matchers: list = []     # each row's matcher (defer)
        rows, matchers, seqs = self.rows.append, self._matchers.append, self._seqs.append
        vocab, last = 0, None
        for j, seq in enumerate(sampled):
            m = seq.matcher
            if m is None:
                continue
            rows(j)
            matchers(m)
            n = len(seq.output_ids)
            seqs((seq, seq.pending_row, n + seq.pending - 1) if seq.pending else (seq, -1, n))
            constraint = seq.params.constraint
            if constraint is not last:
                last, vocab = constraint, max(vocab, int(constraint.vocab_size))
        self._previous = previous     # the previous launch's handle (its ids()), when a token is pending
        self.words = mask_words(vocab)
        # the bits, flat (a Python int a read): set once they are written, None again once `into`'s memory
        # holds a later mask's (the engine thread's check reads it: RowMatcher.sync, allows)
        self.flat: memoryview | None = None
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

    @property
    def previous(self):
        return self._previous

    @property
    def reads_previous(self) -> bool:
        """A row's pending token is in the previous launch's ids (consume reads them)."""
        return any(row >= 0 for _, row, _ in self._seqs)

    def defer(self, worker_consumes: bool = False) -> None:
        """The mask worker computes it: the launcher may sample later. With `worker_consumes` the worker
        also consumes the rows' pending tokens, first (MaskWorker.read_back hands it over without doing
        it on the engine thread): each row's matcher is told so here, on the engine thread, before the
        hand-over (RowMatcher.expect), and checks the token it reads back against the bit of the mask
        that let it through (``allows``) instead of calling llguidance. Only where every row's matcher
        takes that protocol (not the benches' probes): else the engine thread consumes, as before."""
        self.deferred = True
        if not worker_consumes:
            return
        matchers = self._matchers
        kinds = set(map(type, matchers))
        expect_rows = getattr(next(iter(kinds)), "expect_rows", None) if len(kinds) == 1 else None
        if expect_rows is not None:     # (RowMatcher's: the loop below without a call a row)
            expect_rows(self, matchers, self._seqs)
        else:
            for m in matchers:
                if not hasattr(m, "expect"):
                    return
            for j, (m, (_, row, index)) in enumerate(zip(matchers, self._seqs)):
                if row >= 0:
                    m.expect(self, j, index + 1, True)
                else:
                    m.expect(self, j, index, False)
        self.worker_consumes = True

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
                self._plan = _Plan.of(self._seqs, self.rows, _LAST[0]()) or False
                if self._plan:
                    _LAST[0] = weakref.ref(self._plan)
            except Exception:   # (never seen: lists of what the rows hold) the consume takes the general path
                log.exception("a token mask's plan could not be built (rows %s)", self.rows)
                self._plan = False

    def _consume(self) -> list[bool]:
        # llguidance is imported only once a request has a constraint: engine runs without one (the GPU
        # benches on an image that lacks the wheel) never load it
        from aotx.structured import batch

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
                raise MaskOutOfStep(f"sequence {self._seqs[plan.pending[0]][0].seq_id}: a pending token and no "
                                    "step to read it from")
            tokens = self._previous.ids()[plan.id_rows].tolist()
            pm = plan.pending_matchers
            if list(map(len, plan.pending_tokens)) == plan.pending_index:    # (each at its token: the worker's case)
                batch.consume_rows(pm, plan.pending_lls, tokens, plan.pending_tokens)   # (one token each)
            else:       # a row has it already: sync compares
                ok = [True] * len(self._seqs)
                for k, good in zip(plan.pending, batch.sync_rows(pm, plan.pending_index, tokens)):
                    ok[k] = good
                self._out_of_step()
        oks = list(map(_OK, plan.matchers))      # (not m.failed)
        if ok is None:
            return oks
        return [good and o for good, o in zip(ok, oks)]

    def _consume_rows(self, batch) -> list[bool]:
        """The general path: any matcher with RowMatcher's interface."""
        pending = [k for k, (_, row, _) in enumerate(self._seqs) if row >= 0]
        ok = [True] * len(self._seqs)
        if pending:
            if self._previous is None:
                raise MaskOutOfStep(f"sequence {self._seqs[pending[0]][0].seq_id}: a pending token and no "
                                    "step to read it from")
            ids = self._previous.ids()
            got = batch.sync_rows([self._seqs[k][0].matcher for k in pending], [self._seqs[k][2] for k in pending],
                                  [int(ids[self._seqs[k][1]]) for k in pending])
            for k, good in zip(pending, got):
                ok[k] = good
        self._out_of_step()
        for k, (seq, _, _) in enumerate(self._seqs):
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
        from aotx.structured import batch

        # a refused token ends the request when its step is read back: its row here is never used
        bits = self._out if self._out is not None else np.empty((len(self._seqs), self.words), dtype=np.uint32)
        plan = self._plan
        every = all(ok)
        if plan:
            pairs = plan.pairs if every else [(ll, k) for ll, k in plan.pairs if ok[k]]
            if pairs:
                batch.fill_pairs(pairs, bits, plan.lls if every else [ll for ll, _ in pairs])
        else:
            fill = [k for k in range(len(self._seqs)) if ok[k]]
            if fill:
                sub = bits if len(fill) == len(self._seqs) else np.empty((len(fill), bits.shape[1]), np.uint32)
                batch.fill_rows([self._seqs[k][0].matcher for k in fill], sub)
                if sub is not bits:
                    bits[fill] = sub
        if not every:
            bits[[k for k in range(len(self._seqs)) if not ok[k]]] = np.uint32(0xFFFFFFFF)
        return TokenMask(plan.rows if plan else np.array(self.rows, dtype=np.int32), bits)


_OK = operator.attrgetter("_ok")     # a RowMatcher's: not failed


# the plan built last, while its mask lives (LateMask.prepare: the mask worker builds them one at a time, in
# launch order): the next one shares its lists where its rows are the same
_LAST: list = [lambda: None]


# the mask whose bits are in a given memory (by address: `into`), so that an earlier one stops answering
_HOLDERS: "weakref.WeakValueDictionary[int, LateMask]" = weakref.WeakValueDictionary()


def step_mask(sampled: Sequence[Seq], previous=None) -> LateMask | None:
    """The launch's mask (called by the launcher, or run by the mask worker), or None when no sampled
    row is constrained. `previous`: the handle of the launch before (tokens still pending on the device)."""
    if not any(seq.matcher is not None for seq in sampled):
        return None
    return LateMask(sampled, previous)
