"""Every shared POST of a mutation: the body parsed once, here (aotx.runtime.parse_submission), then
submitted; a malformed body is answered 400 and reaches no runtime.

`submit_raw` is the one path from a body to the runtime's result: the blueprint's handlers (`mutate`)
and the ASGI fast path (api.shared.fast) both call it. A handler carries its kind as `mutation_kind`
(the fast path serves exactly the POST rules whose view has one)."""

from __future__ import annotations

from typing import Any

from quart import request

from aotx.runtime import Outcome, RuntimePort, parse_submission
from aotx.runtime.input_trace import TRACE
from aotx.state.derive import lineage_for
from aotx.state import Actor, MutationKind, SubmitInput

from .common import actor, answer, shared
from .media import foreign_media


async def submit_raw(runtime: RuntimePort, kind: MutationKind, raw: bytes, resource: str | None, who: Actor,
                     media: Any) -> Any:
    """Parse `raw` once (a malformed body: its 400 Outcome, no runtime sees it), check an input's media
    against the `media` store (ApiError 409), submit; the result is what `answer_parts` reads."""
    mutation = parse_submission(kind, raw, resource)   # parsed once, here
    if isinstance(mutation, Outcome):
        return mutation
    if isinstance(mutation, SubmitInput):
        if TRACE.on:   # the input trace's first stage (aotx.runtime.input_trace)
            TRACE.stamp(lineage_for(who.principal), mutation.envelope.sequence, "received")
        await foreign_media(mutation, media, who.principal)
    return await runtime.submit(who, mutation)


def mutate(kind: MutationKind):
    async def handler(space: str | None = None, con: str | None = None):
        raw = await request.get_data(cache=False, as_text=False)
        ext = shared()
        return answer(await submit_raw(ext["runtime"], kind, raw, space if con is None else con, actor(),
                                       ext["media"]))
    handler.mutation_kind = kind   # type: ignore[attr-defined]
    return handler
