"""Every shared POST of a mutation: the body parsed once, here (aotx.runtime.parse_submission), then
submitted; a malformed body is answered 400 and reaches no runtime."""

from __future__ import annotations

from quart import request

from aotx.runtime import Outcome, parse_submission
from aotx.runtime.input_trace import TRACE
from aotx.state.derive import lineage_for
from aotx.state import MutationKind, SubmitInput

from .common import actor, answer, runtime
from .media import foreign_media


def mutate(kind: MutationKind):
    async def handler(space: str | None = None, con: str | None = None):
        raw = await request.get_data(cache=False, as_text=False)
        mutation = parse_submission(kind, raw, space if con is None else con)   # parsed once, here
        if isinstance(mutation, Outcome):   # malformed: 400, no runtime sees it
            return answer(mutation)
        if isinstance(mutation, SubmitInput):
            if TRACE.on:   # the input trace's first stage (aotx.runtime.input_trace)
                TRACE.stamp(lineage_for(actor().principal), mutation.envelope.sequence, "received")
            await foreign_media(mutation)
        return answer(await runtime().submit(actor(), mutation))
    return handler
