"""The engine: one background thread runs schedule -> launch -> (previous step) postprocess.

One step behind (EngineConfig.overlap, aotx.engine.launch): step N+1 is scheduled and launched
before step N's sampled ids are read back, so the device never waits for the host; a pending
token's id reaches step N+1 on the device. A sequence that stopped at step N may have computed one
more token in step N+1: it is never delivered, counted or journalled, and its pages are freed when
step N is read. Arrivals, cancellations and prefill chunks join at the next step boundary.

Callers on an asyncio loop submit() and iterate the returned RequestHandle;
everything that touches sequences, the scheduler and the KV pool happens on
the step thread (numpy/BLAS release the GIL, so the loop stays responsive).
The scheduler's line is also read by page claims from other threads
(claim_pages): every change to it happens under the engine's lock.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import threading
import uuid

from aotx.engine.block_manager import BlockManager, pages_for
from aotx.engine.detokenizer import Detokenizer
from aotx.engine.engine_config import EngineConfig, Tokenizer
from aotx.engine.request import SAMPLING_EPS, RequestHandle, RequestRejected, validate_request
from aotx.engine.launch import Launcher, make_launcher
from aotx.engine.runner import Backend, InFlight, ModelRunner
from aotx.engine.scheduler import Claim, ScheduledSeq, Scheduler
from aotx.engine.sequence import Sequence
from aotx.engine.stats import EngineStats, StatsCollector
from aotx.engine.step_output import StepOutput
from aotx.engine.types import Delta, SamplingParams

log = logging.getLogger(__name__)
ENGINE_STOPPED = "engine stopped"   # the `error` of every request still unfinished when stop() ends it


class Engine(StepOutput):
    def __init__(self, backend: Backend, tokenizer: Tokenizer, config: EngineConfig = EngineConfig(),
                 launcher: Launcher | None = None) -> None:
        pool = (getattr(backend, "num_pages", None), getattr(backend, "page_size", None))
        if pool[0] is not None and (pool[0] < config.num_pages or pool[1] != config.page_size):
            raise ValueError(f"backend KV pool is {pool[0]} pages of {pool[1]}; the engine config "
                             f"wants {config.num_pages} pages of {config.page_size}")
        self.config = config
        self.tokenizer = tokenizer
        self.blocks = BlockManager(config.num_pages, config.page_size)
        self.scheduler = Scheduler(self.blocks, config.max_batch, config.prefill_token_budget)
        launcher = launcher or make_launcher(backend, config.overlap)
        self.runner = ModelRunner(backend, self.blocks, tokenizer, launcher)
        self._one_behind = launcher.overlaps if config.overlap is None else config.overlap
        self._pause = getattr(launcher, "pause", lambda: None)
        # a request never needs more pages than the whole pool
        self.max_model_len = min(config.max_model_len, config.num_pages * config.page_size)
        self._stats = StatsCollector(config.num_pages)
        self._token_texts: dict[int, str | None] = {}   # the detokenizers' shared cache of whole-UTF-8 token texts
        # a whole-UTF-8 token's (text, (id,)): the quiet path's text and token_ids, shared (aotx.engine.step_output)
        self._whole_tokens: dict[int, tuple[str, tuple[int]]] = {}
        self._cond = threading.Condition()
        # (kind, sequence or seq id, handle, the page claim an added sequence takes over or borrows, borrows?)
        self._inbox: list[tuple[str, Sequence | int, RequestHandle | None, Claim | None, bool]] = []
        self._queued = 0                  # submitted and not yet admitted (guarded by _cond)
        self._committed = 0               # pages reserved by every request not yet ended (guarded by _cond)
        self._handles: dict[int, RequestHandle] = {}   # step thread only
        self._outbox: list[tuple] = []  # delivered after gauges sync (aotx.engine.request.deliver's items)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._stalled = False             # the last step admitted and ran nothing: wait for a change

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("engine already started")
        self._thread = threading.Thread(target=self._loop, name="aotx-engine", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Stop the step thread; unfinished requests end with finish_reason "error"."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        else:
            self._shutdown()

    def committed_pages(self) -> int:
        """Pages promised to requests not yet ended: current page owners (running) plus pending
        page requests (queued), each counted at its conservative reservation (prompt + max_tokens)."""
        with self._cond:
            return self._committed

    # -- page claims (any thread): the scheduler's line, under the engine's lock ----------------
    def claim_pages(self, pages: int, since: float) -> Claim | None:
        """Promise `pages` to work that joined the admission line at `since` (time.monotonic) and
        will submit its request later (`submit(..., claim=...)`), if they fit beside what arrived
        before it; else None, and later arrivals leave those pages free until it fits (the hold:
        aotx.engine.scheduler). Either way, nothing already admitted is disturbed."""
        with self._cond:
            # requests not in the line yet that arrived before it (one taking a claim over is its claim)
            pending = sum(item.reserved_pages for kind, item, _, claim, borrow in self._inbox
                          if kind == "add" and (claim is None or borrow) and item.line < since)
            claim = self.scheduler.claim(pages, since, pending)
            self._changed()
            return claim

    def release_claim(self, claim: Claim) -> None:
        """The claimant ended without a request: its pages go back to the line."""
        with self._cond:
            self.scheduler.release(claim)
            self._changed()

    def release_hold(self) -> None:
        """No claimant waits any more: later arrivals are admitted by pages alone again."""
        with self._cond:
            self.scheduler.clear_hold()
            self._changed()

    def claimed_pages(self) -> int:
        with self._cond:
            return self.scheduler.claimed_pages

    def _changed(self) -> None:
        """Under _cond: the line changed, so a stalled step loop looks at it again."""
        self._stalled = False
        self._cond.notify()

    def stats(self) -> EngineStats:
        with self._cond:
            queued = self._queued
        timing = getattr(self.runner.launcher, "timing", None)
        t = timing() if timing is not None else {}
        return dataclasses.replace(self._stats.snapshot(queue_depth=queued),
                                   device_busy_s=t.get("busy_s", 0.0), device_idle_s=t.get("idle_s", 0.0))

    # -- the caller's side (any thread with a running event loop) ---------------
    def submit(self, prompt_ids: list[int], params: SamplingParams, *,
               claim: Claim | None = None, borrow: bool = False) -> RequestHandle:
        """Queue a request; with `claim` (from claim_pages), it takes over the claim's pages and its
        place in the admission line (a refused request releases the claim); with `borrow` too, it
        stands at the claim's place and may use its pages, but the claim stays for a later request."""
        try:
            return self._submit(prompt_ids, params, claim, borrow)
        except RequestRejected:
            if claim is not None and not borrow:
                self.release_claim(claim)
            raise

    def _submit(self, prompt_ids: list[int], params: SamplingParams, claim: Claim | None,
                borrow: bool) -> RequestHandle:
        loop = asyncio.get_running_loop()
        prompt = [int(t) for t in prompt_ids]
        vocab = getattr(self.tokenizer, "vocab_size", None)
        validate_request(prompt, params, self.max_model_len, vocab)
        max_tokens = min(params.max_tokens, self.max_model_len - len(prompt))
        # a top_k that keeps the whole vocabulary is "off" (and must fit the int32 row field)
        top_k = 0 if params.top_k >= (vocab or 2**31) else params.top_k
        # a temperature below SAMPLING_EPS is greedy (vLLM's rule): 1/t would overflow the logits' scale
        # (every weight 0 below ~3e-39), and above that it picks the top token all but always anyway
        temperature = 0.0 if params.temperature < SAMPLING_EPS else params.temperature
        if max_tokens != params.max_tokens or top_k != params.top_k or temperature != params.temperature:
            params = dataclasses.replace(params, max_tokens=max_tokens, top_k=top_k, temperature=temperature)
        eos = self.tokenizer.eos_id
        stop_ids = {*params.stop_token_ids} | (set() if params.ignore_eos else {eos})
        seq = Sequence(
            prompt_ids=prompt, params=params,
            # any integer is a seed; the sampler reads it mod 2**64 (its uint64 row field)
            seed=params.seed % 2**64 if params.seed is not None else secrets.randbits(63),
            reserved_pages=pages_for(len(prompt) + max_tokens, self.config.page_size),
            detokenizer=Detokenizer(self.tokenizer, params.stop, stop_ids,
                                    silent_ids=frozenset({eos} - stop_ids) if params.ignore_eos else frozenset(),
                                    texts=self._token_texts),
            matcher=params.constraint.start() if params.constraint is not None else None,
        )
        handle = RequestHandle(uuid.uuid4().hex, len(prompt), max_tokens, loop,
                               on_cancel=lambda: self._post("cancel", seq.seq_id, None))
        with self._cond:
            if self._stopping:
                raise RequestRejected("engine_stopped", "the engine is shutting down")
            if self._queued >= self.config.max_queue:
                raise RequestRejected("queue_full", f"{self._queued} requests already waiting")
            self._queued += 1
            self._committed += seq.reserved_pages
            self._inbox.append(("add", seq, handle, claim, borrow))
            self._changed()
        return handle

    def _post(self, kind: str, item: Sequence | int, handle: RequestHandle | None) -> None:
        with self._cond:
            self._inbox.append((kind, item, handle, None, False))
            self._changed()

    # -- the step thread -----------------------------------------------------
    def _loop(self) -> None:
        pending: InFlight | None = None      # the step on the device, read back one step behind
        while True:
            with self._cond:
                while (pending is None and not self._inbox and (self._stalled or not self.scheduler.has_work())
                       and not self._stopping):
                    self._pause()          # the device idles for want of work, not for the host
                    self._cond.wait()
                if self._stopping:
                    break
                inbox, self._inbox = self._inbox, []
            self._apply(inbox)
            launched = None
            if self.scheduler.has_work():
                try:
                    launched = self._launch(pending)
                except Exception as exc:  # a bug here must not leave callers waiting forever
                    log.exception("engine step failed outside the backend")
                    self._fail_all(f"engine error: {type(exc).__name__}: {exc}")
            classic = launched is not None and (not self._one_behind or launched.needs_logits)
            if pending is not None:     # step N+1 is on its way: read step N back, deliver, look again
                self._complete_guarded(pending)
                self.runner.sample_ready()   # step N+1's mask may be ready: its sampling goes now
            pending = launched
            if classic:
                self._complete_guarded(launched)    # the classic loop; logprobs read this step's logits
                pending = None
        self.runner.masks.close()       # first: a mask may still read a launch's ids (staging memory)
        self.runner.launcher.close()
        self._shutdown()

    def _apply(self, inbox) -> None:
        """New requests join the line, cancellations are marked: at the step boundary."""
        for kind, item, handle, claim, borrow in inbox:
            if kind == "add":
                try:
                    with self._cond:
                        self.scheduler.add(item, claim, borrow)
                except Exception as exc:  # refused here: end that request, keep the engine
                    if claim is not None and not borrow:
                        self.release_claim(claim)
                    log.exception("engine could not queue a request")
                    self._handles[item.seq_id] = handle
                    self._end(item, Delta("", finish_reason="error", error=f"{type(exc).__name__}: {exc}"))
                    self._flush()
                    continue
                self._handles[item.seq_id] = handle
            elif item in self._handles:
                self.scheduler.cancel(item)

    def _launch(self, pending: InFlight | None = None) -> InFlight | None:
        """Schedule and launch one step; None when nothing runs (cancellations are delivered).
        `pending`: the step before, launched and not read yet."""
        with self._cond:   # claims are made on other threads: the line is read and moved under the lock
            out = self.scheduler.schedule()
            # nothing ran and nothing can until the line changes (a claim or hold keeps the waiting back)
            self._stalled = not out.scheduled and not out.cancelled
        for seq in out.cancelled:
            self._end(seq, Delta("", finish_reason="cancelled"))
        if not out.scheduled:
            self._sync_gauges()
            self._flush()
            return None
        try:
            step = self.runner.launch(out.scheduled, pending)
        except Exception as exc:  # a failing backend must not take the engine down
            self._step_failed(out.scheduled, exc)
            return None
        self.scheduler.launched()
        self._stats.step(out.num_decode, out.num_prefill_tokens)
        return step

    def _complete_guarded(self, step: InFlight) -> None:
        try:
            self._complete(step)
        except Exception as exc:  # a bug here must not leave callers waiting forever
            log.exception("engine step failed outside the backend")
            self._fail_all(f"engine error: {type(exc).__name__}: {exc}")

    def _complete(self, step: InFlight) -> None:
        """Read a launched step back: record, detokenize and deliver its tokens. A sequence that
        ended meanwhile (a stop in the step before, a cancellation) drops its token unseen."""
        try:
            tids, results = self.runner.complete(step)
        except Exception as exc:  # a failing backend must not take the engine down
            self._step_failed(step.scheduled, exc)
        else:
            self._postprocess_step(step, tids, results)
        with self._cond:
            self._stalled = False         # tokens were recorded or sequences ended: look at the line again
        self._sync_gauges()
        self._flush()

    def _step_failed(self, scheduled: list[ScheduledSeq], exc: Exception) -> None:
        log.error("engine step failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
        for s in scheduled:
            if not s.seq.is_finished:
                self._finish(s.seq, "error")
                self._end(s.seq, Delta("", finish_reason="error", error=f"{type(exc).__name__}: {exc}"))
        self._sync_gauges()
        self._flush()

    def _sync_gauges(self) -> None:
        with self._cond:
            self._queued = len(self.scheduler.waiting) + sum(1 for k, *_ in self._inbox if k == "add")
        self._stats.set_gauges(len(self.scheduler.running), self.blocks.pages_in_use)

    def _shutdown(self) -> None:
        with self._cond:
            inbox, self._inbox = self._inbox, []
        for kind, item, handle, claim, borrow in inbox:
            if kind == "add":
                with self._cond:
                    self.scheduler.add(item, claim, borrow)
                self._handles[item.seq_id] = handle
        self._fail_all(ENGINE_STOPPED)

    def _fail_all(self, message: str) -> None:
        for seq in [*self.scheduler.running, *self.scheduler.waiting]:
            self._finish(seq, "error")
            self._end(seq, Delta("", finish_reason="error", error=message))
        self._sync_gauges()
        self._flush()
