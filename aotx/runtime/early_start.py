"""An input asked of the engine before its lease is applied, where its prompt is already known.

Where nothing can be recalled for the input's author in its space (retention mode 1; aotx.runtime
.memory_work.can_recall) its prompt is the bare user turn, whatever the embedding: it is submitted
to the engine (on the input's page claim) while its lease goes into the log — with its admission
(aotx.runtime.admission_lease) or in the execution queue's lease write — instead of after that write
was acknowledged and applied. Nothing of the input's is journalled before its lease is applied: its
deltas wait in the engine handle until its run begins (aotx.runtime.input_run), which builds the
prompt again from the applied state and uses this request only where that prompt is the same (else
it cancels it and asks again). A lease that did not land cancels the request (executor), and so does
a run that ends without reading it (the input cancelled meanwhile, ...). The execution deadline still
starts when the lease is applied.
"""
from __future__ import annotations

from typing import Any, Callable

from ..engine import RequestRejected
from ..sampling_defaults import resolved
from ..state import Grants, State
from . import memory_work as mw
from .input_trace import stamp
from .running import Running


def bare_prompt(service: Any, run: Running, revision: int) -> list[int]:
    """The prompt of an input that recalls nothing (the same bytes input_run builds then)."""
    return run.prompt(service, mw.prompt_messages(mw.nothing_recalled(revision), run.request.text))


def sampling(service: Any, run: Running, room: int):
    from aotx.engine import SamplingParams
    temperature, top_p = resolved(service.sampling_defaults, run.request.temperature, run.request.top_p)
    return SamplingParams(max_tokens=min(int(run.request.max_output_tokens), room), temperature=temperature,
                          top_p=top_p)


def submit_early(service: Any, run: Running, state: State, memory: Any, mode: int, revision: int,
                 grants: Callable[[bytes], Grants]) -> None:
    """Ask the engine for `run` now where its prompt cannot depend on recall (sets `run.handle` and
    `run.early_prompt`; the request takes the run's claim over). A no-op otherwise, or where the engine
    refuses: the run then asks at its start, as always."""
    if mode == 2 or run.handle is not None or run.claim is None or state.participant_row(run.lineage) is None:
        return
    if mw.can_recall(state, memory, run.space, run.lineage, grants(run.lineage)):
        return
    prompt = bare_prompt(service, run, revision)
    room = run.page_limit * int(service.engine.config.page_size) - len(prompt)
    if room < 1:
        return   # its run ends it failed, as always
    claim = run.claim
    try:
        run.handle = service.submit(prompt, sampling(service, run, room), surface="shared", lane="stream", claim=claim)
    except RequestRejected:  # it released the claim; the run asks again at its start (and is refused there)
        service.engine.release_claim(claim)   # (idempotent)
        run.claim = None
        return
    run.claim, run.early_prompt = None, prompt
    stamp(run.lineage, run.sequence, "submitted")


def drop_early(run: Running) -> None:
    """Its lease did not land (or its run will not read it): the early request goes."""
    if run.early_prompt is not None and run.handle is not None:
        run.handle.cancel()
        run.handle = None
    run.early_prompt = None
