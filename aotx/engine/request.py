"""The caller's side of a request: rejection errors and the async delta stream."""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable

from aotx.engine.types import Delta, SamplingParams

_new = object.__new__


class RequestRejected(Exception):
    """submit() refused a request before it was queued.

    `code`: "empty_prompt", "context_length_exceeded", "queue_full",
    "invalid_prompt" (token id outside the vocabulary), "invalid_params" or
    "engine_stopped".
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


SAMPLING_EPS = 1e-5     # a temperature below it samples greedily (Engine.submit; vLLM's _SAMPLING_EPS)


def validate_request(prompt: list[int], p: SamplingParams, max_model_len: int,
                     vocab_size: int | None) -> None:
    """Raise RequestRejected for a request the engine must not queue."""
    if not prompt:
        raise RequestRejected("empty_prompt", "the prompt has no tokens")
    if len(prompt) >= max_model_len:
        raise RequestRejected("context_length_exceeded",
                              f"prompt has {len(prompt)} tokens; the limit is {max_model_len - 1}")
    if vocab_size is not None and not (min(prompt) >= 0 and max(prompt) < vocab_size):
        raise RequestRejected("invalid_prompt", f"prompt token ids must be in [0, {vocab_size})")
    problems = [
        (p.max_tokens < 0, "max_tokens must be >= 0"),
        (p.temperature < 0, "temperature must be >= 0"),
        (not 0.0 < p.top_p <= 1.0, "top_p must be in (0, 1]"),
        (p.top_k < 0, "top_k must be >= 0"),
        (not 0.0 <= p.min_p <= 1.0, "min_p must be in [0, 1]"),
        (not -2.0 <= p.presence_penalty <= 2.0, "presence_penalty must be in [-2, 2]"),
        (not -2.0 <= p.frequency_penalty <= 2.0, "frequency_penalty must be in [-2, 2]"),
        (len({t for t, _ in p.logit_bias}) != len(p.logit_bias), "logit_bias token ids must be distinct"),
        (vocab_size is not None and not all(0 <= t < vocab_size for t, _ in p.logit_bias),
         f"logit_bias token ids must be in [0, {vocab_size})"),
        (not all(-100.0 <= b <= 100.0 for _, b in p.logit_bias), "logit_bias values must be in [-100, 100]"),
        (p.logprobs is not None and p.logprobs < 0, "logprobs must be >= 0"),
        (p.prompt_logprobs is not None and p.prompt_logprobs < 0, "prompt_logprobs must be >= 0"),
        (p.ignore_eos and p.constraint is not None,
         "ignore_eos cannot be combined with a structured output (it ends only at EOS)"),
    ]
    for bad, message in problems:
        if bad:
            raise RequestRejected("invalid_params", message)


class DeltaStream:
    """Async iteration over a request's deltas, ending after the one with a finish reason (kept in
    `finish_reason`); the engine's own handle and an HTTP worker's remote one. The deltas wait in a
    mailbox (`_push` on the handle's loop) for its one reader: a deque and at most one waiting future,
    lighter than an asyncio.Queue per token.

    A reader that waits in `__anext__` (nothing in the box) awaits the future itself (no coroutine of
    ours around it): the next delta is handed over as that future's result (`_hand`) and never enters
    the box; deltas pushed before the reader runs again wait in the box, behind it. A future its reader
    cancelled takes nothing: the delta goes to the box. (`next_batch` takes whatever waits in the box
    once woken, so its wait hands nothing over.)"""

    _box: deque
    _waiter: asyncio.Future | None
    _hand: int          # what the waiter's result is: 0 none (its reader takes from the box), 1 the delta
    _done: bool
    finish_reason: str | None

    _need: int | None   # a gathering reader's wait: the characters still wanted before it is woken

    def _open_box(self) -> None:
        self._box = deque()
        self._waiter = None
        self._hand = 0
        self._need = None

    def _push(self, delta: Delta) -> None:
        waiter = self._waiter
        if waiter is not None and self._hand:
            self._waiter = None
            if not waiter.done():
                if delta.finish_reason is not None:   # (_take's bookkeeping: the reader has it now)
                    self._done = True
                    self.finish_reason = delta.finish_reason
                waiter.set_result(delta)
                return
            waiter = None   # (a reader cancelled while it waited left a cancelled future)
        self._box.append(delta)
        if waiter is not None:
            need = self._need
            if need is not None and delta.finish_reason is None:
                need -= len(delta.text)
                if need > 0:            # a gathering reader wants more text first (gather)
                    self._need = need
                    return
            self._wake()

    def _wake(self) -> None:
        waiter, self._waiter, self._need = self._waiter, None, None
        if waiter is not None and not waiter.done():   # a reader cancelled while it waited left a cancelled future
            waiter.set_result(None)

    def _due(self) -> None:
        """A gathering reader's deadline passed: wake it now if anything waits, else at the next delta."""
        if self._box:
            self._wake()
        elif self._waiter is not None:
            self._need = 0

    def __aiter__(self):
        return self

    def __anext__(self) -> asyncio.Future:
        """An awaitable of the next delta (a plain method: an empty box's reader awaits the future that
        `_push` settles with the delta, no coroutine of ours a token)."""
        if self._done:
            raise StopAsyncIteration
        if not self._box:    # the next delta is the result of the future its reader awaits
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            self._hand = 1
            return waiter
        ready = asyncio.get_running_loop().create_future()
        ready.set_result(self._take())
        return ready

    def _take(self) -> Delta:
        """The next delta of the box; the final one ends the stream."""
        delta = self._box.popleft()
        if delta.finish_reason is not None:
            self._done = True
            self.finish_reason = delta.finish_reason
        return delta

    def waiting(self) -> list[Delta]:
        """The deltas in the box now, up to and with the final one (no wait; [] when none): what came
        with the one `__anext__` gave, in the same loop callback (api.runner's one-handle reader)."""
        return self._drain() if self._box else []

    def _drain(self) -> list[Delta]:
        """Every delta waiting, up to and with the final one."""
        box, out = self._box, []
        while box and not self._done:
            out.append(self._take())
        return out

    async def gather(self, chars: int, until: float | None = None) -> list[Delta]:
        """Like next_batch, but the reader is woken only once the waiting deltas hold at least `chars`
        characters of text, or the final delta, or the loop's clock passed `until` (then at the first
        delta): a reader that batches what it takes (a shared input's journal writes,
        aotx.runtime.input_run) wakes once per batch, not once per engine step."""
        if self._done:
            return []
        box, loop = self._box, asyncio.get_running_loop()
        late = until is not None and loop.time() >= until
        have = sum(len(d.text) for d in box)
        if not box or not (late or have >= chars or any(d.finish_reason is not None for d in box)):
            self._need = 0 if late else max(0, chars - have)
            self._hand = 0
            waiter = self._waiter = loop.create_future()
            timer = loop.call_at(until, self._due) if until is not None and not late else None
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                if self._waiter is waiter:   # (cancelled while it waited)
                    self._waiter = self._need = None
        return self._drain()

    async def next_batch(self) -> list[Delta]:
        """Every delta waiting (at least one; [] once the final one was read), up to and with the final
        one: what an engine step (or several, while the reader was busy) delivered, in one wake-up."""
        if self._done:
            return []
        box = self._box
        while not box:   # (the wait inline: one coroutine a wake-up, not two)
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            self._hand = 0
            await waiter
        return self._drain()


class RequestHandle(DeltaStream):
    """An async iterator of Delta for one request; the last has finish_reason set.

    Deltas are produced on the engine thread and handed to the submitting
    event loop with call_soon_threadsafe, so iterate it on that loop.
    """

    def __init__(self, request_id: str, prompt_tokens: int, max_tokens: int,
                 loop: asyncio.AbstractEventLoop, on_cancel: Callable[[], None]) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens          # after clipping to the context window
        self._loop = loop
        self._open_box()
        self._on_cancel = on_cancel
        self._cancel_sent = False
        self._done = False                   # the final delta was consumed
        self.finish_reason: str | None = None
        self._sink: Callable[[Delta], None] | None = None
        self._observer: Callable[[Delta], None] | None = None
        # a plain token given by its parts (put_plain): the sink's and the observer's own hooks, when they
        # have them (then no Delta is made for it at all)
        self._plain_sink: Callable[[str, tuple[int, ...], int], None] | None = None
        self._plain_observer: Callable[[], None] | None = None

    def cancel(self) -> None:
        """Ask the engine to stop this request (idempotent; no-op once finished).

        The stream then ends with a Delta whose finish_reason is "cancelled"
        (unless the request had already finished another way).
        """
        if self._cancel_sent or self._done:
            return
        self._cancel_sent = True
        self._on_cancel()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def observe(self, observer: Callable[[Delta], None]) -> None:
        """On the handle's loop, before its first delta: `observer` sees every delta first (the request
        latency histograms: aotx.request_latency), wherever the delta then goes. An observer with a
        `plain` attribute (a callable of no argument) is told of a plain token (put_plain) by that call."""
        self._observer = observer
        self._plain_observer = getattr(observer, "plain", None)

    def put(self, delta: Delta) -> None:
        """On the handle's loop: queue one delta for the iterator (or hand it to the sink of `redirect`)."""
        if self._observer is not None:
            self._observer(delta)
        if self._sink is not None:
            if delta.finish_reason is not None:
                self._done = True
                self.finish_reason = delta.finish_reason
            self._sink(delta)
            return
        self._push(delta)

    def put_plain(self, text: str, token_ids: tuple[int, ...], completion_tokens: int) -> None:
        """On the handle's loop: a plain token's delta given by its parts, equal to ``Delta(text, token_ids,
        prompt_tokens=self.prompt_tokens, completion_tokens=completion_tokens)`` (the engine's quiet path
        hands these over without making the Delta on its thread, aotx.engine.step_output). With a plain
        sink (`redirect`) and an observer that takes plain tokens (or none), no Delta is made at all."""
        sink = self._plain_sink
        if sink is not None and (self._observer is None or self._plain_observer is not None):
            if self._plain_observer is not None:
                self._plain_observer()
            sink(text, token_ids, completion_tokens)
            return
        d = _new(Delta)    # (the fields that differ from Delta's class defaults: aotx.engine.step_output)
        fields = d.__dict__
        fields["text"] = text
        fields["token_ids"] = token_ids
        fields["prompt_tokens"] = self.prompt_tokens
        fields["completion_tokens"] = completion_tokens
        if self._observer is not None:     # (put, inlined: this delta never finishes the stream)
            if self._plain_observer is not None:
                self._plain_observer()
            else:
                self._observer(d)
        if self._sink is not None:
            self._sink(d)
            return
        waiter = self._waiter
        if waiter is not None and self._hand and not waiter.done():   # (_push's hand-over, inlined)
            self._waiter = None
            waiter.set_result(d)
        else:
            self._push(d)

    def redirect(self, sink: Callable[[Delta], None],
                 plain: Callable[[str, tuple[int, ...], int], None] | None = None) -> None:
        """On the handle's loop, before its first delta: every delta goes to `sink` (called on the loop,
        once per delta, all of one engine step in one loop callback) instead of the iterator; a plain token
        (put_plain) to `plain(text, token_ids, completion_tokens)` when given. The NATS engine service
        (aotx.engine_service) forwards a step's deltas as one message this way."""
        self._sink = sink
        self._plain_sink = plain


def deliver(loop: asyncio.AbstractEventLoop, items: list[tuple]) -> bool:
    """Engine thread: hand a step's deltas to one event loop with a single wake-up. An item is
    (handle, delta), or a plain token's (handle, text, token_ids, completion_tokens) (put_plain).

    Returns False when that loop is closed (nobody will read them).
    """
    def put_all() -> None:
        for item in items:
            if len(item) == 2:
                item[0].put(item[1])
                continue
            handle, text, ids, n = item
            sink = handle._plain_sink
            if sink is not None:   # (put_plain's plain-sink case, inlined: an HTTP worker's generation)
                seen = handle._plain_observer
                if seen is not None:
                    seen()
                    sink(text, ids, n)
                    continue
                if handle._observer is None:
                    sink(text, ids, n)
                    continue
            handle.put_plain(text, ids, n)
    try:
        loop.call_soon_threadsafe(put_all)
    except RuntimeError:
        return False
    return True
