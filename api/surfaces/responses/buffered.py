"""Responses buffered builder: the stream machine run to its terminal response."""
from __future__ import annotations

from typing import Sequence

from aotx.engine.types import Delta
from api.errors import engine_failure
from api.surfaces.responses.stream import ResponsesStreamProjector


def build_response(deltas: Sequence[Delta], **projector_args) -> dict:
    """A call the stream would end broken comes back as text here (api.decode, buffered)."""
    projector = ResponsesStreamProjector(**projector_args, buffered=True)
    projector.open()
    for delta in deltas:
        projector.feed(0, delta)
        if projector.done:
            break
    final = projector.final
    if final is None:
        raise engine_failure("generation ended without a finish")
    if final["status"] == "failed":
        raise projector.failure
    return final
