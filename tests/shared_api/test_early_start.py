"""An input whose prompt cannot depend on recall is asked of the engine while its lease goes into the log
(aotx/runtime/early_start.py), not after it was applied; one that may recall waits for its lease as
before; a lease that does not land cancels that early request. Real nats-server, real model."""
from __future__ import annotations

import pytest

from aotx.runtime import SharedRuntime
from aotx.state import Execution
from eventlog import JournalFull
from tests.waiting import wait_until_async

from .harness import fresh_spec, shared_app
from .test_memory import SubmitSpy, _memory, _no_memory_prompt, _register, _say, _space


class LeaseSpy(SubmitSpy):
    """Notes, for each request asked of the engine, how many inputs had an applied lease (running) then."""

    runtime = None

    def __init__(self, service) -> None:
        super().__init__(service)
        self.running_at_submit: list[int] = []
        self.handles: list = []

    def submit(self, prompt, params, **kw):
        state = self.runtime.state
        self.running_at_submit.append(sum(1 for r in state.executions
                                          if r is not None and r.status is Execution.RUNNING))
        self.handles.append(super().submit(prompt, params, **kw))
        return self.handles[-1]


async def _alice_with_model(spy, runtime, parties):
    """The spy watching `runtime`, alice registered, and the model she may name."""
    spy.runtime = runtime
    alice = parties["alice"]
    await _register(alice)
    return alice, (await alice.get("/capabilities"))[1]["models"][0]["id"]


async def test_nothing_to_recall_is_asked_of_the_engine_before_its_lease_is_applied(nats_url, service):
    spy = LeaseSpy(service)
    async with shared_app(nats_url, fresh_spec(), service=spy) as (runtime, p, client):
        alice, model = await _alice_with_model(spy, runtime, p)
        space, con = await _space(alice)
        text = "Remember that the boat leaves at nine."
        first = await _say(alice, con, text, model, tokens=6, temperature=0)
        # asked while its admission and lease were being appended: no input was running yet
        assert spy.running_at_submit == [0] and len(spy.prompts) == 1
        assert first["result"]["input_tokens"] == _no_memory_prompt(service, text)
        assert sorted(r["kind"] for r in await _memory(alice, space)) == ["embedding", "source", "text"]
        # the next input of that space may recall the first: it is asked once its lease is applied
        second = await _say(alice, con, "When does the boat leave?", model, tokens=4, temperature=0)
        assert spy.running_at_submit == [0, 1] and len(spy.prompts) == 2
        assert second["result"]["input_tokens"] > _no_memory_prompt(service, "When does the boat leave?")
        fresh = await SharedRuntime(nats_url, runtime.spec, progress=False).start()
        try:
            assert fresh.state_hash() == runtime.state_hash()
        finally:
            await fresh.stop()


async def test_an_early_request_whose_admission_did_not_land_is_cancelled(nats_url, service):
    spec = fresh_spec(max_bytes=96 * 1024)
    spy = LeaseSpy(service)
    async with shared_app(nats_url, spec, service=spy, probe_interval=0.1) as (runtime, p, client):
        alice, model = await _alice_with_model(spy, runtime, p)
        _, con = await _space(alice)
        filler = spec.subject("f" * 32, "filler")
        with pytest.raises(JournalFull):
            for i in range(100_000):
                await runtime.recorder.append(filler, b"x" * 512, msg_id=f"fill-{i}")
        status, body = await alice.post(f"/conversations/{con}/inputs",
                                        alice.body(text="Hello there.", model=model, max_output_tokens=64))
        assert status == 429, body
        assert len(spy.prompts) == 1   # it was asked of the engine with its append, which the full log refused
        await wait_until_async(lambda: service.engine.committed_pages(), "the early request to be cancelled",
                               done=lambda pages: pages == 0)
        await runtime.recorder.js.purge_stream(spec.name, subject=filler)
        await wait_until_async(lambda: not runtime.hold.active, "the hold to lift")
        status, op = await alice.get("/participant")
        assert status == 200 and op["next_sequence"] == str(alice.next_sequence), op   # nothing was admitted


async def test_an_early_request_for_another_prompt_is_cancelled_and_the_input_asked_again(nats_url, service,
                                                                                        monkeypatch):
    """Where the applied state gives the run another prompt than the early one (memory became recallable
    in between: stood in for here by marking the early prompt as another), the run cancels the early
    request and asks again, without the claim that request took over; the input completes."""
    import aotx.runtime.executor as executor_module

    real = executor_module.submit_early

    def submit_then_differ(service_, run, *args):
        real(service_, run, *args)
        if run.early_prompt is not None:
            run.early_prompt = [*run.early_prompt, 0]   # not the prompt the run will build

    monkeypatch.setattr(executor_module, "submit_early", submit_then_differ)
    spy = LeaseSpy(service)
    async with shared_app(nats_url, fresh_spec(), service=spy) as (runtime, p, client):
        alice, model = await _alice_with_model(spy, runtime, p)
        _, con = await _space(alice)
        text = "Name three rivers."
        done = await _say(alice, con, text, model, tokens=6, temperature=0)
        assert spy.running_at_submit == [0, 1] and spy.prompts[0] == spy.prompts[1]   # early, then again
        assert spy.handles[0]._cancel_sent and not spy.handles[1]._cancel_sent   # the early one was cancelled
        assert done["result"]["input_tokens"] == _no_memory_prompt(service, text) and done["result"]["output_tokens"]
        await wait_until_async(lambda: service.engine.committed_pages(), "both requests to have ended",
                               done=lambda pages: pages == 0)


class PromptCounter(LeaseSpy):
    """Counts the prompts the runtime renders (the chat template and the tokenizer, on the event loop)."""

    def __init__(self, service) -> None:
        super().__init__(service)
        self.rendered = 0

    def chat_prompt(self, *args, **kw):
        self.rendered += 1
        return self._service.chat_prompt(*args, **kw)


async def test_an_input_that_recalls_nothing_renders_its_prompt_once(nats_url, service):
    # its page bound (the bare user turn), its early start and its run all want the same prompt: it is
    # rendered once, in its admission's round, not three times (twice of them inside that round)
    spy = PromptCounter(service)
    async with shared_app(nats_url, fresh_spec(), service=spy) as (runtime, p, client):
        alice, model = await _alice_with_model(spy, runtime, p)
        _, con = await _space(alice)
        text = "Remember that the boat leaves at nine."
        done = await _say(alice, con, text, model, tokens=4, temperature=0)
        assert spy.running_at_submit == [0] and spy.rendered == 1
        assert done["result"]["input_tokens"] == _no_memory_prompt(service, text)
