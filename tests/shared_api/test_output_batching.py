"""A shared input's run takes its engine output in batches (aotx/runtime/input_run.py with
DeltaStream.gather): it is woken once per journal write it makes — its first bytes at once, then once
FLUSH_BYTES wait or FLUSH_SECONDS passed, then its end — not once per engine step, so at 32 inputs the
event loop does not run 32 tasks at every step for output that waits anyway. The deltas come from a
scripted request here (one per loop callback, 2 ms apart, as engine steps), so the count of wake-ups
does not depend on how fast this machine runs the model; nats-server, the runtime and the routes are real."""
from __future__ import annotations

import asyncio

from aotx.engine.request import RequestHandle
from aotx.engine.types import Delta
from aotx.state import Capacities

from .harness import fresh_spec, shared_app
from .test_memory import SubmitSpy, _register, _space
from .test_inputs import _wait

STEPS, WORD = 60, "word "


class CountingHandle(RequestHandle):
    """Counts the times a delta woke the reader waiting on it."""

    def __init__(self, prompt_tokens: int, max_tokens: int) -> None:
        super().__init__("scripted", prompt_tokens, max_tokens, asyncio.get_running_loop(), lambda: None)
        self.wakes = 0

    def _push(self, delta: Delta) -> None:
        waiting = self._waiter is not None
        super()._push(delta)
        self.wakes += waiting and self._waiter is None


class ScriptedSteps(SubmitSpy):
    """The model service whose requests produce `WORD` at each of STEPS steps (their claims released:
    the engine does no work for them)."""

    def __init__(self, service) -> None:
        super().__init__(service)
        self.handles: list[CountingHandle] = []

    def submit(self, prompt, params, *, claim=None, **kw):
        self.prompts.append(list(prompt))
        if claim is not None:
            self._service.engine.release_claim(claim)
        handle = CountingHandle(len(prompt), params.max_tokens)
        self.handles.append(handle)
        asyncio.get_running_loop().create_task(self._steps(handle, min(STEPS, params.max_tokens)))
        return handle

    @staticmethod
    async def _steps(handle: CountingHandle, n: int) -> None:
        in_flight = 2   # steps already launched when a cancellation is seen (the engine runs one behind)
        for k in range(1, n + 1):
            await asyncio.sleep(0.002)
            if handle._cancel_sent and (in_flight := in_flight - 1) < 0:
                handle.put(Delta("", finish_reason="cancelled", prompt_tokens=handle.prompt_tokens,
                                 completion_tokens=k - 1))
                return
            handle.put(Delta(WORD, token_ids=(k,), finish_reason="length" if k == n else None,
                             prompt_tokens=handle.prompt_tokens, completion_tokens=k))


async def _one_input(nats_url, service, **runtime_kw) -> tuple[dict, str, CountingHandle, list]:
    """One scripted input of STEPS steps: its end, its result text, its handle and its run's writes."""
    spy = ScriptedSteps(service)
    async with shared_app(nats_url, fresh_spec(), service=spy, **runtime_kw) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        _, con = await _space(alice)
        journal = runtime.executor.journal
        writes, write = [], journal.write

        async def counted(run, *events):
            writes.append([type(e).__name__ for e in events])
            return await write(run, *events)
        journal.write = counted
        status, receipt = await alice.post(f"/conversations/{con}/inputs",
                                           alice.body(text="Say words.", model=model, max_output_tokens=STEPS))
        assert status == 202, receipt
        done = await _wait(alice, receipt["operation"])
        status, body = await alice.get(f"/operations/{receipt['operation']}/result")
        assert status == 200, body
        (handle,) = spy.handles
        return done, body["text"], handle, [w for w in writes if "OutputAppended" in w or "InputCompleted" in w]


async def test_an_input_run_is_woken_once_per_journal_write_not_once_per_engine_step(nats_url, service):
    done, text, handle, output_writes = await _one_input(nats_url, service)
    assert done["execution"] == "completed" and done["result"]["output_tokens"] == STEPS, done
    assert text == WORD * STEPS
    # every wake-up of the run ends in one write: its first bytes, a batch, its end (before: one wake-up
    # a step, each adding 5 bytes to what waited for the next write)
    assert len(output_writes) >= 2, output_writes
    assert handle.wakes <= len(output_writes), (handle.wakes, output_writes)


async def test_an_input_past_its_result_bytes_is_cut_there_and_its_request_cancelled(nats_url, service):
    done, text, handle, output_writes = await _one_input(nats_url, service, capacities=Capacities(result_bytes=64))
    assert done["execution"] == "completed" and done["result"]["finish"] == "result_limit", done
    assert text == (WORD * STEPS)[:64] and handle._cancel_sent   # the engine was told to stop
    # the wake-up that passes the cap writes nothing (its bytes go with the end); after it only the
    # request's final delta wakes the run
    assert handle.wakes <= len(output_writes) + 1, (handle.wakes, output_writes)
