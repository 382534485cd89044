"""An input's body is parsed once: the route parses it, the runtime decides with that value, and the
executor runs the very same parsed input (the stored canonical bytes are only read where no parsed
value is at hand: a read-back, a restart) — real nats-server, real model."""

from __future__ import annotations

from aotx.journal import TransferKind
from aotx.state.mutation_forms import from_canonical

from .harness import shared_app, fresh_spec
from .test_inputs import _setup, _wait


async def test_the_executor_runs_the_input_the_route_parsed(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, _):
        _, con = await _setup(p)
        seen = []

        def admitted(applied):   # added after the executor's own observer: its input is queued by now
            for t in applied.transfers:
                if t.kind == TransferKind.ADMISSION:
                    key = (t.body["lineage"], t.body["sequence"])
                    run = next(r for r in [*runtime.executor.queue, *runtime.executor.running.values()]
                               if r.key == key)
                    seen.append((applied.mutations.get(key), run.request, t.body["command"]))
        runtime.observers.add(admitted)
        alice = p["alice"]
        status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
            text="Name one colour.", model=service.model_id, max_output_tokens=4))
        assert status == 202, receipt
        (parsed, running, command), = seen
        assert parsed is not None and running is parsed           # the route's value, not parsed again
        assert from_canonical(command) == parsed                  # what a restart would read back
        assert (parsed.text, parsed.max_output_tokens) == ("Name one colour.", 4)
        done = await _wait(alice, receipt["operation"])
        assert done["execution"] == "completed", done
