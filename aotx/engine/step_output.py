"""What a read step turns into: each row's token recorded, detokenized and stop-checked, its delta queued,
and a step's deltas handed to each caller's event loop at once (the engine's step thread only).

A plain token (no logprobs, constraint, stop string or stop/silent id, not the last) takes the short path:
no RowResult, ``Detokenizer.plain``'s common case inline, a Delta with only its non-default fields set,
the step's latencies handed to the stats once. Once a sequence's token went out that way it is quiet
(``Sequence.quiet``: its handle, detokenizer, special ids and budget): its later plain tokens are recorded
and handed to the loop as their parts, (handle, text, (id,), completion tokens), no Delta made on this
thread (``RequestHandle.put_plain`` makes it on the loop, or none for the engine service's sink); a token
that is special, ends the budget or meets an open character leaves the quiet path for the full one (host
work per row-step: docs/PERFORMANCE.md, issue 12, sessions 9, 11 and 12). A constrained sequence is quiet the
same way (``Sequence.quiet_checked``, kept apart so that a plain quiet row's test is unchanged): each of its
tokens is first checked (the step's at once where the masks allow: LateMask.verify, issue 14, session 14; else
by its matcher, ``sync``); a refused one ends its request with the error as before, an allowed one goes on as
a plain quiet token (issue 14, session 13).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time

from aotx.engine.request import RequestHandle, deliver
from aotx.engine.runner import InFlight, RowResult
from aotx.engine.scheduler import Scheduler
from aotx.engine.sequence import Sequence, SequenceStatus
from aotx.engine.stats import StatsCollector
from aotx.engine.types import Delta

log = logging.getLogger("aotx.engine.engine")   # the engine's own logger (moved out of engine.py, same name)
FINISHED = SequenceStatus.FINISHED


class StepOutput:
    """The Engine's output side (a mixin: aotx.engine.engine.Engine has the state)."""

    _handles: dict[int, RequestHandle]
    _token_texts: dict[int, str | None]
    _whole_tokens: dict[int, tuple[str, tuple[int]]]
    _outbox: list[tuple]   # (handle, Delta), or a plain token's (handle, text, token_ids, completion_tokens)
    _stats: StatsCollector
    _cond: threading.Condition
    _committed: int
    scheduler: Scheduler

    def _postprocess_step(self, step: InFlight, tids: list[int], results: dict[int, RowResult]) -> None:
        """Every row of a read step; a plain decode token (no logprobs, no refusal by its constraint, no
        stop string or stop/silent id, not the last) takes the short path: its text from the engine's cache
        of whole tokens, one Delta (a quiet sequence's: its parts), no RowResult, the latency figures handed
        to the stats once per step."""
        now = time.monotonic()
        sample = step.plan.sample
        if len(sample) != len(step.scheduled):   # rows that sampled nothing (prefill chunks): prompt logprobs
            sampled = {id(q) for _, q in sample}
            for s in step.scheduled:
                seq = s.seq
                if id(seq) not in sampled and seq.status is not FINISHED:
                    self._postprocess(seq, (results.get(seq.seq_id) if results else None) or RowResult(), None, now)
        ttfts: list[float] = []
        lasts: list[float] = []     # each later token's previous token time (its ITL: now - that, grouped)
        handles, outbox, texts, whole = self._handles, self._outbox, self._token_texts, self._whole_tokens
        new = object.__new__
        # the constrained rows' tokens checked for the step at once where the masks allow (verified: no
        # row's matcher is asked), else each row's matcher checks its own (sync: no llguidance call either)
        mask = step.mask
        verified = mask is not None and mask.verify(step.ids, results)
        for (_, seq), tid in zip(sample, tids):
            if seq.status is FINISHED:
                continue
            quiet = seq.quiet
            if quiet is None or (results and seq.seq_id in results):
                m = seq.matcher     # a constrained token checked here (no llguidance call) takes a short path too
                if (results and seq.seq_id in results) or (m is not None and not verified
                                                           and not m.sync(len(seq.output_ids), tid)):
                    self._postprocess(seq, results.get(seq.seq_id) or RowResult(), tid, now)
                    continue
                quiet = seq.quiet_checked   # a constrained sequence's quiet parts: its token is allowed
                if quiet is None:
                    # a sequence's first token, or one of a sequence that is never quiet (a stop string,
                    # logprobs): one Delta with only its non-default fields; a plain one makes it quiet
                    outs = seq.output_ids
                    last = seq.last_token_time
                    if last is None:
                        ttfts.append(now - seq.arrival_time)
                        seq.first_token_time = now
                    else:
                        lasts.append(last)
                    seq.last_token_time = now
                    outs.append(tid)
                    det = seq.detokenizer
                    text = None
                    if det.quick and tid not in det.special:   # (Detokenizer.plain, its common case inlined)
                        if det.clean:
                            text = texts.get(tid)
                        if text is None:
                            text = det.plain(tid)
                        elif text:
                            det.parts.append(text)
                    params = seq.params
                    if text is None or len(outs) >= params.max_tokens or (
                            params.prompt_logprobs is not None and not seq.prompt_logprobs_sent):
                        self._finish_token(seq, tid, None, last is None, text)
                        continue
                    handle = handles.get(seq.seq_id)
                    if handle is None:
                        continue
                    # plain_delta(...), inlined: only the fields that differ from Delta's class defaults are set
                    # in the instance (a dataclass keeps each default as a class attribute, so the others read,
                    # compare, hash, copy and pickle the same as in a constructed Delta: tests/engine)
                    d = new(Delta)
                    fields = d.__dict__
                    fields["text"] = text
                    fields["token_ids"] = (tid,)
                    fields["prompt_tokens"] = len(seq.prompt_ids)
                    fields["completion_tokens"] = len(outs)
                    if last is None:
                        fields["queued_s"] = seq.queued_s
                    outbox.append((handle, d))
                    if params.logprobs is None:   # (a logprobs row has a RowResult each step: never quiet)
                        if m is None:
                            seq.quiet = (handle, det, det.special, params.max_tokens)
                        else:   # its matcher checks each later token before that token takes the quiet path
                            seq.quiet_checked = (handle, det, det.special, params.max_tokens)
                    continue
            # the quiet path: a sequence whose earlier token went out as a plain delta (set above)
            handle, det, special, budget = quiet
            outs = seq.output_ids
            outs.append(tid)
            lasts.append(seq.last_token_time)
            seq.last_token_time = now
            n = len(outs)
            if det.clean and n < budget and tid not in special:
                hit = whole.get(tid)     # a whole-UTF-8 token: (its text, (its id,)), shared
                if hit is None:
                    ids = (tid,)
                    text = det.plain(tid)   # (fills the detokenizer's cache; a split character: decoded)
                    if texts.get(tid) is not None:
                        whole[tid] = (text, ids)
                else:
                    text, ids = hit
                    if text:
                        det.parts.append(text)
                outbox.append((handle, text, ids, n))   # its Delta's parts (RequestHandle.put_plain)
                continue
            text = det.plain(tid) if n < budget else None    # (a character still open, or a stop/silent id)
            if text is None:
                self._finish_token(seq, tid, None, False, None)
                continue
            self._send(seq, Delta(text, (tid,), (), None, None, len(seq.prompt_ids), n))
        self._stats.tokens_at(now, ttfts, lasts)

    def _postprocess(self, seq: Sequence, res: RowResult, tid: int | None, now: float) -> None:
        seq.prompt_logprobs.extend(res.prompt_logprobs)
        if tid is None:
            if not seq.in_prefill and seq.params.max_tokens == 0:
                self._finish(seq, "length")
                self._end(seq, Delta("", finish_reason="length"))
            return
        first = seq.first_token_time is None
        self._stats.token(ttft=now - seq.arrival_time if first else None,
                          itl=None if first else now - seq.last_token_time)
        seq.record_token(tid, now)
        if seq.matcher is not None and not seq.matcher.sync(len(seq.output_ids) - 1, tid):
            # never happens while the mask is applied; if it does, the output is not trusted
            log.error("constrained sequence %s drew a token its constraint refuses: %s", seq.seq_id,
                      seq.matcher.error)
            self._finish(seq, "error")
            # (a matcher process that died says so: aotx.structured.proc_row)
            why = getattr(seq.matcher, "end_error", None) or "constraint violated"
            self._end(seq, Delta("", finish_reason="error", error=why))
            return
        self._finish_token(seq, tid, res.logprob, first, None)

    def _finish_token(self, seq: Sequence, tid: int, logprob, first: bool, plain: str | None) -> None:
        """A recorded token's text, stop checks and delta (`plain`: its text when the detokenizer
        already took it as a plain token)."""
        if plain is None:
            step = seq.detokenizer.add(tid)
            text, reason, stop = step.text, step.finish_reason, step.stop_sequence
        else:
            text, reason, stop = plain, None, None
        if reason is None and len(seq.output_ids) >= seq.params.max_tokens:
            tail = seq.detokenizer.flush()
            text, reason, stop = text + tail.text, tail.finish_reason or "length", tail.stop_sequence
        delta = Delta(text, (tid,), (logprob,) if logprob is not None else (), reason, stop,
                      seq.prompt_len, len(seq.output_ids),     # the counts _send would add: no copy
                      queued_s=seq.queued_s if first else None)
        if reason is not None:
            self._finish(seq, reason)
            self._end(seq, delta)
        else:
            self._send(seq, delta)

    def _finish(self, seq: Sequence, reason: str) -> None:
        with self._cond:
            self.scheduler.finish(seq, reason)

    def _send(self, seq: Sequence, delta: Delta) -> None:
        handle = self._handles.get(seq.seq_id)
        if handle is None:
            return
        extra = {}
        if not seq.prompt_logprobs_sent and seq.params.prompt_logprobs is not None:
            extra["prompt_logprobs"] = tuple(seq.prompt_logprobs)
            seq.prompt_logprobs_sent = True
        if extra or delta.prompt_tokens != seq.prompt_len or delta.completion_tokens != len(seq.output_ids):
            delta = dataclasses.replace(delta, prompt_tokens=seq.prompt_len,
                                        completion_tokens=len(seq.output_ids), **extra)
        self._outbox.append((handle, delta))

    def _flush(self) -> None:
        """Hand the step's deltas to their loops, one wake-up a loop; the outbox itself where every handle
        has the one loop (the common case: no regrouping)."""
        outbox, self._outbox = self._outbox, []
        if not outbox:
            return
        loop = outbox[0][0]._loop
        for item in outbox:
            if item[0]._loop is not loop:
                break
        else:
            if not deliver(loop, outbox):
                self._cancel_undelivered(outbox)
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple]] = {}
        for item in outbox:
            group = by_loop.get(item[0]._loop)
            if group is None:
                group = by_loop[item[0]._loop] = []
            group.append(item)
        for loop, items in by_loop.items():
            if not deliver(loop, items):
                self._cancel_undelivered(items)

    def _cancel_undelivered(self, items: list[tuple]) -> None:
        """Their loop is closed: nobody is listening any more, so their sequences stop (a finished one's
        handle has left `_handles` already)."""
        dead = {id(item[0]) for item in items}
        for seq_id, handle in list(self._handles.items()):
            if id(handle) in dead:
                self.scheduler.cancel(seq_id)

    def _end(self, seq: Sequence, delta: Delta) -> None:
        """Deliver the final delta of a finished sequence and forget its handle."""
        self._stats.finished(delta.finish_reason)
        self._send(seq, delta)
        self._handles.pop(seq.seq_id, None)
        seq.quiet = seq.quiet_checked = None    # (an ended sequence keeps no handle)
        with self._cond:
            self._committed -= seq.reserved_pages
