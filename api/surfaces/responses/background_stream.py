"""The stream machine of a background response: the Responses projector with OpenAI's background
opening (`response.created` and `response.queued` with status `queued`, then `response.in_progress`
once the engine delivers its first delta) and the partial output a cancelled run ends with.

Pure, like ResponsesStreamProjector: every event numbered in order (`sequence_number` = its index in
the saved stream, aotx.stored)."""
from __future__ import annotations

from aotx.engine.types import Delta
from api.sse import ServerSentEvent
from api.surfaces.responses.stream import ResponsesStreamProjector, usage_object


class BackgroundProjector(ResponsesStreamProjector):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._started = False

    def open(self) -> list[ServerSentEvent]:
        snapshot = self.response("queued")
        return [self._event("response.created", response=snapshot),
                self._event("response.queued", response=snapshot)]

    def feed(self, choice: int, delta: Delta) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        if not self._started:
            self._started = True
            events.append(self._event("response.in_progress", response=self.response("in_progress")))
        return events + super().feed(choice, delta)

    def partial(self) -> tuple[list[dict], dict]:
        """(output items so far, usage) of a run stopped before its end (cancelled): an open message
        carries the text generated so far; items not finished are `incomplete`."""
        items = []
        for item in self._output:
            item = dict(item)
            if item.get("status") == "in_progress":
                if item.get("type") == "message":
                    item["content"] = [self._part()]
                item["status"] = "incomplete"
            items.append(item)
        d = self._decoder
        return items, usage_object(d.prompt_tokens, d.completion_tokens)
