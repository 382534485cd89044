"""One choice's engine Deltas -> surface-neutral output events.

Every projector and buffered builder reads these, so tool-call parsing,
finish mapping and error detection live in one place:
    TextOut(text, logprobs)   plain text (logprobs: the tokens of that delta)
    ToolOut(name, arguments)  one complete tool call
    FinishOut(reason, ...)    "stop" | "length" | "tool_calls", with usage
    ErrorOut(message)         the engine failed (or cancelled) after output began
"""
from __future__ import annotations

from dataclasses import dataclass

from aotx.engine.types import Delta, TokenLogprob
from aotx.tool_calls import TextPiece, ToolCallStream


@dataclass(frozen=True)
class TextOut:
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class ToolOut:
    name: str
    arguments: str


@dataclass(frozen=True)
class FinishOut:
    reason: str                      # stop | length | tool_calls
    stop_sequence: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class ErrorOut:
    message: str


Out = TextOut | ToolOut | FinishOut | ErrorOut


class ChoiceDecoder:
    def __init__(self, parse_tools: bool, tool_primer: str = "") -> None:
        self._tools = ToolCallStream() if parse_tools else None
        if self._tools is not None and tool_primer:
            # the prompt already holds the opening of a forced call: read it as output
            self._tools.feed(tool_primer)
        self._pending_lp: tuple[TokenLogprob, ...] = ()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.finished = False
        self.prompt_logprobs: tuple[TokenLogprob, ...] = ()

    def feed(self, delta: Delta) -> list[Out]:
        if self.finished:
            return []
        self.prompt_tokens = max(self.prompt_tokens, delta.prompt_tokens)
        self.completion_tokens = max(self.completion_tokens, delta.completion_tokens)
        if delta.prompt_logprobs:
            self.prompt_logprobs = delta.prompt_logprobs
        self._pending_lp += tuple(delta.logprobs)
        out: list[Out] = []
        if delta.finish_reason in ("error", "cancelled"):
            self.finished = True
            reason = delta.error or ("request cancelled" if delta.finish_reason == "cancelled"
                                     else "engine error")
            return [ErrorOut(reason)]
        pieces = self._tools.feed(delta.text) if self._tools else (
            [TextPiece(delta.text)] if delta.text else [])
        if delta.finish_reason is not None and self._tools:
            pieces += self._tools.finish(delta.finish_reason)
        for piece in pieces:
            if isinstance(piece, TextPiece):
                out.append(TextOut(piece.text, self._take_logprobs()))
            else:
                self._pending_lp = ()  # those tokens spelled the call
                out.append(ToolOut(piece.name, piece.arguments))
        if delta.finish_reason is not None:
            self.finished = True
            if self._pending_lp and not any(isinstance(o, TextOut) for o in out):
                out.append(TextOut("", self._take_logprobs()))
            reason = delta.finish_reason
            if reason == "stop" and self._tools and self._tools.calls:
                reason = "tool_calls"
            out.append(FinishOut(reason, delta.stop_sequence if reason == "stop" else None,
                                 self.prompt_tokens, self.completion_tokens))
        return out

    def _take_logprobs(self) -> tuple[TokenLogprob, ...]:
        lp, self._pending_lp = self._pending_lp, ()
        return lp
