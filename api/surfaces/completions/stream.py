"""Legacy Completions: one choice's Deltas -> text pieces, and the stream projector. Pure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut
from api.logprobs import CompletionLogprobs
from api.sse import DONE, ServerSentEvent
from api.surfaces.openai_chunks import OpenAIChunkStream, usage_object


@dataclass(frozen=True)
class Piece:
    text: str
    logprobs: dict | None = None     # this piece's parallel arrays
    finish: str | None = None
    error: str | None = None


class CompletionChoice:
    """One choice: echo (prompt text and its logprobs) first, then the completion."""

    def __init__(self, echo_text: str | None, logprobs: int | None) -> None:
        self._echo = echo_text
        self._lp = CompletionLogprobs() if logprobs is not None else None
        self.decoder = ChoiceDecoder(parse_tools=False, logprobs=logprobs is not None)

    @property
    def plain(self) -> bool:
        """No echo still to send and no logprobs: a token's piece is its text alone."""
        return self._echo is None and self._lp is None

    def feed(self, delta: Delta) -> list[Piece]:
        outs = self.decoder.feed(delta)
        pieces: list[Piece] = []
        if self._echo is not None:
            block = None
            if self._lp is not None:
                block = self._lp.block(self.decoder.prompt_logprobs, first_is_prompt_start=True)
                self._lp.restart(len(self._echo))
            pieces.append(Piece(self._echo, block))
            self._echo = None
        for out in outs:
            if isinstance(out, TextOut) and out.text:
                block = self._lp.block(out.logprobs) if self._lp is not None else None
                if pieces and pieces[-1].finish is None and pieces[-1].error is None and \
                        block is None:
                    pieces[-1] = Piece(pieces[-1].text + out.text, pieces[-1].logprobs)
                else:
                    pieces.append(Piece(out.text, block))
            elif isinstance(out, FinishOut):
                pieces.append(Piece("", None, finish=out.reason))
            elif isinstance(out, ErrorOut):
                pieces.append(Piece("", error=out.message))
        return pieces


def prompt_usage(choices: Sequence[CompletionChoice], n: int) -> dict:
    prompt = sum(max(c.decoder.prompt_tokens for c in choices[p:p + n])
                 for p in range(0, len(choices), n))
    return usage_object(prompt, sum(c.decoder.completion_tokens for c in choices))


class CompletionStreamProjector(OpenAIChunkStream):
    def __init__(self, *, id: str, created: int, model: str, fingerprint: str, n: int,
                 echo_texts: Sequence[str | None], logprobs: int | None,
                 include_usage: bool) -> None:
        super().__init__(object="text_completion", id=id, created=created, model=model,
                         fingerprint=fingerprint, include_usage=include_usage)
        self._choices = [CompletionChoice(e, logprobs) for e in echo_texts]
        self._finished = [False] * len(self._choices)
        self._n = n

    def open(self) -> list[ServerSentEvent]:
        return []

    def feed(self, i: int, delta: Delta) -> list[ServerSentEvent]:
        choice = self._choices[i]
        if choice.plain:             # a plain token (no echo left, no logprobs): its chunk from the template
            text = choice.decoder.plain_text(delta)
            if text is not None:
                return [self._text_chunk('[{"index":%d,"text":' % i, text,
                                         ',"logprobs":null,"finish_reason":null}]')] if text else []
        events = []
        for piece in choice.feed(delta):
            if piece.error is not None:
                return events + self.fail(piece.error)
            if piece.text or piece.logprobs or piece.finish:
                events.append(self._chunk([{"index": i, "text": piece.text,
                                            "logprobs": piece.logprobs,
                                            "finish_reason": piece.finish}]))
            if piece.finish:
                self._finished[i] = True
                if all(self._finished):
                    self.done = True
                    if self._include_usage:
                        events.append(self._chunk([], prompt_usage(self._choices, self._n)))
                    events.append(ServerSentEvent(DONE))
        return events
