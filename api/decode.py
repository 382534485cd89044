"""One choice's engine Deltas -> surface-neutral output events.

Every projector and buffered builder reads these, so tool-call parsing,
finish mapping, logprob placement and error detection live in one place:
    TextOut(text, logprobs)       returned text; logprobs: exactly the tokens that spell it
    ToolStart(index, name)        a tool call begins
    ToolArgs(index, fragment)     the next fragment of its arguments, as generated
    ToolEnd(index, name, arguments, broken)  its arguments end (broken: not complete JSON)
    FinishOut(reason, ...)        "stop" | "length" | "tool_calls", with usage
    ErrorOut(message)             the engine failed (or cancelled) after output began

`buffered=True` (the buffered builders) passes each call on only once its arguments are
complete and returns a broken one (cut by the budget beyond repair, or left unfinished by
the model) as its raw text, as seed 001 returns an unrepairable cut; streams pass the
fragments on as generated, so there a broken call ends `broken` (aotx.tool_stream). A budget
cut inside a call is logged ("tool call cut by token budget", logger aotx.tool_calls, info).

With logprobs on, text is released at token boundaries (a token's text is held
until all of it is known, at most one token), so each TextOut's logprob entries
concatenate, byte for byte, to its text: tokens that are not returned text (the
end token, a stop string, tool-call markup) are in none; a token that straddles
the end of the returned text is cut to its returned bytes (api.token_spans).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from aotx.engine.types import Delta, TokenLogprob
from aotx.tool_stream import CallArgs, CallEnd, CallStart, TextPiece, ToolCallStream
from api.request_ids import current_request_id
from api.token_spans import TokenSpans

log = logging.getLogger("aotx.tool_calls")


@dataclass(frozen=True)
class TextOut:
    text: str
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class ToolStart:
    index: int
    name: str


@dataclass(frozen=True)
class ToolArgs:
    index: int
    fragment: str


@dataclass(frozen=True)
class ToolEnd:
    index: int
    name: str
    arguments: str                   # every fragment, joined
    broken: bool = False             # not complete JSON (streams only: buffered has it as text)


@dataclass(frozen=True)
class FinishOut:
    reason: str                      # stop | length | tool_calls
    stop_sequence: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class ErrorOut:
    message: str


Out = TextOut | ToolStart | ToolArgs | ToolEnd | FinishOut | ErrorOut


class ChoiceDecoder:
    def __init__(self, parse_tools: bool, tool_primer: str = "", logprobs: bool = False, *,
                 buffered: bool = False) -> None:
        self._tools = ToolCallStream(broken_as_text=buffered) if parse_tools else None
        self._buffered = buffered
        self._origin = 0             # offset of the first generated character in the parsed text
        if self._tools is not None and tool_primer:
            # the prompt already holds the opening of a forced call: read it as output
            self._tools.feed(tool_primer)
            self._origin = len(tool_primer)
        self._fed = 0                # characters read without a tool parser
        self._spans = TokenSpans() if logprobs else None
        self._held: tuple[int, str] | None = None    # (start, text) not yet released
        self._calls: list[list[str]] = []            # [name, arguments] per call
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.finished = False
        self.prompt_logprobs: tuple[TokenLogprob, ...] = ()

    def plain_text(self, delta: Delta) -> str | None:
        """The common token: for a choice with no tool parser and no logprobs, a delta that does not end
        it and carries no prompt logprobs gives its text, with the state `feed` would keep (the one TextOut
        `feed` would return, or nothing for ""); None: this delta needs `feed`."""
        if (self._tools is not None or self._spans is not None or self.finished
                or delta.finish_reason is not None or delta.prompt_logprobs):
            return None
        if delta.prompt_tokens > self.prompt_tokens:
            self.prompt_tokens = delta.prompt_tokens
        if delta.completion_tokens > self.completion_tokens:
            self.completion_tokens = delta.completion_tokens
        self._fed += len(delta.text)
        return delta.text

    def feed(self, delta: Delta) -> list[Out]:
        if self.finished:
            return []
        self.prompt_tokens = max(self.prompt_tokens, delta.prompt_tokens)
        self.completion_tokens = max(self.completion_tokens, delta.completion_tokens)
        if delta.prompt_logprobs:
            self.prompt_logprobs = delta.prompt_logprobs
        if delta.finish_reason in ("error", "cancelled"):
            self.finished = True
            reason = delta.error or ("request cancelled" if delta.finish_reason == "cancelled"
                                     else "engine error")
            return [ErrorOut(reason)]
        final = delta.finish_reason is not None
        if self._spans is not None:
            self._spans.add(delta.logprobs)
            if final:
                self._spans.close()
        if self._tools is not None:
            pieces = self._tools.feed(delta.text)
            if final:
                pieces += self._tools.finish(delta.finish_reason)
        else:
            pieces = [TextPiece(delta.text, self._fed)] if delta.text else []
            self._fed += len(delta.text)
        out: list[Out] = []
        for piece in pieces:
            if isinstance(piece, TextPiece):
                out += self._text(piece)
            elif isinstance(piece, CallStart):
                out += self._release()
                self._calls.append([piece.name, ""])
                out.append(ToolStart(len(self._calls) - 1, piece.name))
            elif isinstance(piece, CallArgs):
                self._calls[-1][1] += piece.text
                out.append(ToolArgs(len(self._calls) - 1, piece.text))
            elif isinstance(piece, CallEnd):
                name, arguments = self._calls[-1]
                out.append(ToolEnd(len(self._calls) - 1, name, arguments, piece.broken))
        if final:
            self.finished = True
            out += self._release()
            reason = delta.finish_reason
            if self._tools is not None:
                reason = self._tools.finish_reason
                self._log_cut()
            out.append(FinishOut(reason, delta.stop_sequence if reason == "stop" else None,
                                 self.prompt_tokens, self.completion_tokens))
        return out

    def _log_cut(self) -> None:
        cut = self._tools.budget_cut
        if cut is None:
            return
        returned = "call" if cut.complete else "text" if self._buffered else "broken call"
        log.info("tool call cut by token budget", extra={"fields": {
            "request_id": current_request_id(), "tool": cut.name, "complete": cut.complete,
            "returned_as": returned, "completion_tokens": self.completion_tokens}})

    # -- text and its logprobs -------------------------------------------------
    def _text(self, piece: TextPiece) -> list[Out]:
        if self._spans is None:
            return [TextOut(piece.text)]
        out: list[Out] = []
        if self._held is not None and self._held[0] + len(self._held[1]) != piece.start:
            out += self._release()            # the earlier text ended (a gap follows it)
        start, text = self._held if self._held is not None else (piece.start, "")
        text += piece.text
        gen = start - self._origin
        ready = self._spans.boundary(gen, gen + len(text)) - gen
        self._held = (start + ready, text[ready:]) if ready < len(text) else None
        if ready > 0:
            out.append(self._out(start, text[:ready]))
        return out

    def _release(self) -> list[Out]:
        """Release held text: it ends here (cut tokens at its end keep their returned part)."""
        if self._held is None:
            return []
        start, text = self._held
        self._held = None
        return [self._out(start, text)]

    def _out(self, start: int, text: str) -> TextOut:
        gen = start - self._origin
        return TextOut(text, self._spans.tokens(max(gen, 0), gen + len(text)))
