"""Model output -> text and tool calls, incrementally, arguments as they are written.

`ToolCallStream.feed(text)` splits the model's text (Hermes format:
<tool_call>{"name": ..., "arguments": {...}}</tool_call>, see aotx.tool_calls)
into pieces:

    TextPiece(text, start)   plain text; `start` is its offset in everything fed
    CallStart(name)          a call begins (its name is known)
    CallArgs(text)           the next fragment of its arguments (JSON text)
    CallEnd(broken)          its arguments end (`broken`: they are not complete JSON)

A call starts as soon as its opening reads `{"name": "<name>", "arguments": {`
("parameters" is read as "arguments"); from then on it is a call, whatever
follows, and every character of the arguments object is passed on as soon as
it is known to keep them valid JSON (aotx.json_prefix: strict_json's JSON, so
no NaN, no overflowing number, no nesting past its depth). The arguments are
the model's own text. They end when their object closes; when the model instead
closes the call, stops, runs out of budget or writes something that is not
JSON, the object is closed for it if at most two closing brackets complete it
(the repair, sent as the last fragment); otherwise the call ends `broken`.
Anything between the end of the arguments and </tool_call> is dropped. A call
whose opening has another form is read whole at </tool_call>
(aotx.tool_calls.parse_call_body) and comes back at once, or as text; one cut
before it could start comes back as its raw text. Whitespace directly before a
call or after one is dropped.

`ToolCallStream(broken_as_text=True)` (buffered answers, which can wait)
holds each call's pieces until its arguments end: a complete call is then
passed on whole, a broken one comes back as its raw text as the model wrote it
(from the whitespace before its <tool_call> to where the next text begins), as
text, never as a call. Streams pass the fragments on at once and cannot take
them back, so there a broken call stays a call that ends `broken`. Nothing
else differs between the two.

`finish(reason)` ends the text; then `finish_reason` is the answer's finish:
"tool_calls" for "stop" when a complete call was made, and for "length" when
the budget ran out inside a call that is complete (repaired or closed), else
the engine's reason. `budget_cut` describes a cut inside a call (for the log).
Pure: no I/O.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from aotx.json_prefix import WHITESPACE, JsonPrefix
from aotx.tool_calls import CLOSE_TAG, MAX_REPAIRED_BRACES, OPEN_TAG, parse_call_body


@dataclass(frozen=True)
class TextPiece:
    text: str
    start: int = 0


@dataclass(frozen=True)
class CallStart:
    name: str


@dataclass(frozen=True)
class CallArgs:
    text: str


@dataclass(frozen=True)
class CallEnd:
    broken: bool = False


@dataclass(frozen=True)
class BudgetCut:
    """The budget ran out inside a call."""
    name: str | None         # None: before its opening was complete
    complete: bool           # its arguments were complete or repaired: it stays a call


Piece = TextPiece | CallStart | CallArgs | CallEnd

_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"'
                   r'\s*:\s*(?=\{)')
_TEXT, _HEADER, _ARGS, _TAIL = "text", "header", "args", "tail"


def _prefix_len(text: str, *tags: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of one of `tags`."""
    for n in range(min(len(text), max(len(t) for t in tags) - 1), 0, -1):
        if any(t.startswith(text[-n:]) for t in tags):
            return n
    return 0


def _json_string(literal: str) -> str | None:
    try:
        value = json.loads(literal)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


class ToolCallStream:
    def __init__(self, *, broken_as_text: bool = False) -> None:
        self._buf = ""           # input not yet consumed; its first character is at _pos
        self._pos = 0
        self._mode = _TEXT
        self._ws = ""            # _TEXT: held trailing whitespace (it may precede a tag)
        self._tag_at = 0         # _HEADER: where the open tag (and the whitespace before it) began
        self._tag_ws = ""
        self._after_call = False
        self._json: JsonPrefix | None = None
        self._args_ws = ""       # _ARGS: whitespace between JSON tokens, not yet passed on
        self._as_text = broken_as_text
        self._raw: list[str] | None = None   # broken_as_text: the open call's text as written
        self._raw_at = 0
        self._held: list[Piece] = []          # broken_as_text: the open call's pieces
        self._name: str | None = None         # the open call's name
        self._broken = False                  # the open call's arguments ended broken
        self.complete_calls = 0
        self.finish_reason: str | None = None
        self.budget_cut: BudgetCut | None = None

    def feed(self, text: str) -> list[Piece]:
        self._buf += text
        out: list[Piece] = []
        step = {_TEXT: self._text, _HEADER: self._header, _ARGS: self._args, _TAIL: self._tail}
        while self._buf and step[self._mode](out):
            pass
        return out

    def finish(self, finish_reason: str | None = None) -> list[Piece]:
        """Flush at the end of generation (`finish_reason` "length": the budget ran out)."""
        out: list[Piece] = []
        length = finish_reason == "length"
        if self._mode == _TEXT:
            self._flush_text(out)
        elif self._mode == _HEADER:           # cut before it was a call: its raw text
            self._raw = None
            if length:
                self.budget_cut = BudgetCut(None, False)
            self._emit(out, self._tag_ws + OPEN_TAG + self._buf, self._tag_at, hold=False)
        else:
            if self._mode == _ARGS:
                self._end_args(out)
            if length:
                self.budget_cut = BudgetCut(self._name, not self._broken)
            self._consume(len(self._buf))     # what is left of the call
            self._end_tail(out, hold=False)
        self._buf, self._ws, self._mode = "", "", _TEXT
        reason = finish_reason
        if (reason == "stop" and self.complete_calls) or (
                length and self.budget_cut is not None and self.budget_cut.complete):
            reason = "tool_calls"
        self.finish_reason = reason
        return out

    # -- modes: each consumes what it can; True when another step may follow ---
    def _text(self, out: list[Piece]) -> bool:
        start = self._buf.find(OPEN_TAG)
        if start < 0:
            keep = _prefix_len(self._buf, OPEN_TAG)
            self._emit_buf(out, len(self._buf) - keep)
            return False
        self._emit_buf(out, start)
        self._tag_ws, self._tag_at = self._ws, self._pos - len(self._ws)
        self._ws = ""
        if self._as_text:
            self._raw, self._raw_at = [self._tag_ws], self._tag_at
        self._consume(len(OPEN_TAG))
        self._mode = _HEADER
        return True

    def _header(self, out: list[Piece]) -> bool:
        close = self._buf.find(CLOSE_TAG)
        body = self._buf if close < 0 else self._buf[:close]
        head = _HEAD.match(body)
        name = _json_string(head.group(1)) if head else None
        if name:
            self._consume(head.end())
            self._sink(out).append(self._start(name))
            self._mode, self._json, self._args_ws = _ARGS, JsonPrefix(), ""
            return True
        if close < 0:
            return False
        self._raw = None
        self._consume(close + len(CLOSE_TAG))
        self._mode = _TEXT
        call = parse_call_body(body)
        if call is None:                      # not a call: the block is text
            self._ws = ""
            self._emit(out, self._tag_ws + OPEN_TAG + body + CLOSE_TAG, self._tag_at)
            return True
        out += [self._start(call.name), CallArgs(call.arguments), CallEnd()]
        self.complete_calls += 1
        return True

    def _args(self, out: list[Piece]) -> bool:
        reader, taken, k = self._json, [], 0
        while k < len(self._buf):
            c = self._buf[k]
            if c == "<" and CLOSE_TAG.startswith(self._buf[k:k + len(CLOSE_TAG)]):
                break                         # </tool_call> (or maybe): it ends the call, even in a string
            if not reader.feed(c):
                break
            k += 1
            if c in WHITESPACE and not reader.in_string:
                self._args_ws += c
            else:
                taken.append(self._args_ws + c)
                self._args_ws = ""
            if reader.complete:
                break
        self._consume(k)
        if taken:
            self._sink(out).append(CallArgs("".join(taken)))
        if reader.complete:
            self._end_args(out)
            return True
        if not self._buf:
            return False
        rest = self._buf
        if len(rest) < len(CLOSE_TAG) and CLOSE_TAG.startswith(rest):
            return False                      # maybe </tool_call>: wait for it
        self._end_args(out)                   # the model closed the call, or left JSON
        return True

    def _tail(self, out: list[Piece]) -> bool:
        """After the arguments: drop what is left of the call up to its close (or a new call)."""
        close, again = self._buf.find(CLOSE_TAG), self._buf.find(OPEN_TAG)
        if close >= 0 and (again < 0 or close < again):
            self._consume(close + len(CLOSE_TAG))
        elif again >= 0:
            self._consume(again)
        else:
            self._consume(len(self._buf) - _prefix_len(self._buf, CLOSE_TAG, OPEN_TAG))
            return False
        self._end_tail(out)
        self._mode = _TEXT
        return True

    # -- helpers -------------------------------------------------------------
    def _sink(self, out: list[Piece]) -> list[Piece]:
        """Where the open call's pieces go: out, or held until the call is known complete."""
        return self._held if self._as_text else out

    def _start(self, name: str) -> CallStart:
        self._tag_ws = ""
        self._after_call = True
        self._name, self._broken = name, False
        return CallStart(name)

    def _end_args(self, out: list[Piece]) -> None:
        """The arguments end: complete, repaired (at most two closing brackets), or broken."""
        reader = self._json
        closers = "" if reader.complete else reader.closers()
        complete = closers is not None and len(closers) <= MAX_REPAIRED_BRACES
        sink = self._sink(out)
        if complete:
            if closers:
                sink.append(CallArgs(closers))
            sink.append(CallEnd())
            self.complete_calls += 1
            out += self._held                 # broken_as_text: the call, whole
            self._raw = None
        elif not self._as_text:
            out.append(CallEnd(broken=True))
        self._held = []                       # broken_as_text: a broken call is its text (_end_tail)
        self._broken = not complete
        self._json, self._args_ws = None, ""
        self._mode = _TAIL

    def _end_tail(self, out: list[Piece], *, hold: bool = True) -> None:
        """The call's text ends; a broken call held back (broken_as_text) comes back as that text."""
        if self._raw is None:
            return
        raw, self._raw = "".join(self._raw), None
        self._after_call = False
        self._emit(out, raw, self._raw_at, hold=hold)

    def _consume(self, n: int) -> None:
        if self._raw is not None:
            self._raw.append(self._buf[:n])
        self._buf = self._buf[n:]
        self._pos += n

    def _emit_buf(self, out: list[Piece], n: int) -> None:
        """Consume the first `n` characters of the buffer as text."""
        text, start = self._buf[:n], self._pos
        self._consume(n)
        self._emit(out, text, start)

    def _flush_text(self, out: list[Piece]) -> None:
        text, start = self._buf, self._pos
        self._consume(len(text))
        self._emit(out, text, start, hold=False)

    def _emit(self, out: list[Piece], text: str, start: int, *, hold: bool = True) -> None:
        """Text at offset `start`: leading whitespace after a call is dropped; trailing
        whitespace is held (it may precede a call) unless `hold` is False."""
        if self._after_call:
            body = text.lstrip()
            start += len(text) - len(body)
            text = body
            if not text:
                return
            self._after_call = False
        if self._ws:
            start -= len(self._ws)
            text = self._ws + text
        body = text.rstrip() if hold else text
        self._ws = text[len(body):]
        if not body:
            return
        last = out[-1] if out else None
        if isinstance(last, TextPiece) and last.start + len(last.text) == start:
            out[-1] = TextPiece(last.text + body, last.start)
        else:
            out.append(TextPiece(body, start))
