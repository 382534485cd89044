"""Strict JSON (RFC 8259) read one character at a time.

`JsonPrefix.feed(c)` accepts a character only while the text read so far stays
a prefix of some valid JSON document, so a reader can pass accepted text on at
once (a streamed tool call's arguments) and know where the value ends
(`complete`). `closers()` says which closing brackets would complete the text
now, when only brackets are missing. Pure: no I/O.

Valid means what aotx.strict_json.loads accepts: besides RFC 8259's grammar (so
no NaN or Infinity), no number that overflows a double (`1e999`), no integer of
more than MAX_INT_DIGITS digits, no nesting deeper than MAX_JSON_DEPTH. The
character that breaks one of those bounds is refused and the text can no longer
be completed (`closers()` is None from then on): closing the brackets after
`1e99` would hand on a number the text never said.
"""
from __future__ import annotations

import math

from aotx.strict_json import MAX_INT_DIGITS, MAX_JSON_DEPTH

WHITESPACE = " \t\n\r"
_CLOSE = {"{": "}", "[": "]"}
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_ESCAPES = '"\\/bfnrtu'
_HEX = "0123456789abcdefABCDEF"

# states
_VALUE = "value"            # a value is expected
_KEY_OR_END = "key|}"       # just after "{"
_KEY = "key"                # after "," in an object
_COLON = "colon"            # after a key
_AFTER = "after"            # after a value inside a container: "," or the closer
_VALUE_OR_END = "value|]"   # just after "["
_STRING = "string"
_ESCAPE = "escape"
_UNICODE = "unicode"        # inside \uXXXX
_LITERAL = "literal"
_NUMBER = "number"
_DONE = "done"              # the top-level value is complete

# number sub-states (JSON's number grammar); those in _NUMBER_ENDS may end the number
_N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_E_SIGN, _N_EXP = range(8)
_NUMBER_ENDS = {_N_ZERO, _N_INT, _N_FRAC, _N_EXP}


def _number_step(sub: int, c: str) -> int | None:
    digit = c.isascii() and c.isdigit()
    if sub == _N_MINUS:
        return _N_ZERO if c == "0" else _N_INT if digit else None
    if sub in (_N_ZERO, _N_INT):
        if sub == _N_INT and digit:
            return _N_INT
        return _N_DOT if c == "." else _N_E if c in "eE" else None
    if sub in (_N_DOT, _N_FRAC):
        if digit:
            return _N_FRAC
        return _N_E if sub == _N_FRAC and c in "eE" else None
    if sub == _N_E:
        return _N_E_SIGN if c in "+-" else _N_EXP if digit else None
    return _N_EXP if digit else None    # _N_E_SIGN, _N_EXP


class JsonPrefix:
    """One JSON value, read incrementally and strictly (no NaN, no comments)."""

    def __init__(self) -> None:
        self._stack: list[str] = []   # open containers: "{" or "["
        self._state = _VALUE
        self._key = False             # the open string is an object key
        self._rest = ""               # _LITERAL: characters still expected
        self._code = ""               # _UNICODE: the hex digits read so far
        self._high = False            # a high surrogate escape waits for its low half
        self._num = _N_MINUS          # _NUMBER: sub-state
        self._number = ""             # _NUMBER: its text so far
        self.broken = False           # a bound was broken: the text cannot be completed

    @property
    def complete(self) -> bool:
        return self._state == _DONE

    @property
    def in_string(self) -> bool:
        return self._state in (_STRING, _ESCAPE, _UNICODE)

    def feed(self, c: str) -> bool:
        """Accept `c` (True) when the text stays a valid JSON prefix; else change nothing
        (but a broken bound: `broken`, and nothing is accepted any more)."""
        if self.broken:
            return False
        saved = (list(self._stack), self._state, self._key, self._rest, self._code, self._high,
                 self._num, self._number)
        if self._step(c):
            return True
        (self._stack, self._state, self._key, self._rest, self._code, self._high,
         self._num, self._number) = saved
        return False

    def closers(self) -> str | None:
        """The closing brackets that complete the text now, or None when more than
        brackets is missing (an open string, a dangling "," or ":", a half literal)."""
        if self.broken:
            return None
        if self._state == _DONE:
            return ""
        closable = self._state in (_AFTER, _KEY_OR_END, _VALUE_OR_END) or (
            self._state == _NUMBER and self._num in _NUMBER_ENDS)
        if not closable or not self._stack:
            return None
        return "".join(_CLOSE[b] for b in reversed(self._stack))

    # -- the automaton ------------------------------------------------------
    def _step(self, c: str) -> bool:
        state = self._state
        if state == _STRING:
            if self._high and c != "\\":
                return False                # a surrogate pair must be completed
            if c == '"':
                self._end_string()
            elif c == "\\":
                self._state = _ESCAPE
            elif ord(c) < 0x20:
                return False
            return True
        if state == _ESCAPE:
            if c not in _ESCAPES or (self._high and c != "u"):
                return False
            self._state, self._code = (_UNICODE, "") if c == "u" else (_STRING, "")
            return True
        if state == _UNICODE:
            if c not in _HEX:
                return False
            self._code += c
            if len(self._code) == 4:
                return self._end_unicode(int(self._code, 16))
            return True
        if state == _LITERAL:
            if c != self._rest[0]:
                return False
            self._rest = self._rest[1:]
            if not self._rest:
                self._end_value()
            return True
        if state == _NUMBER:
            nxt = _number_step(self._num, c)
            if nxt is not None:
                self._num = nxt
                self._number += c
                return self._number_in_bounds()
            if self._num not in _NUMBER_ENDS:
                return False
            self._end_value()
            return self._step(c)      # the character after a number is read on its own
        if state == _DONE:
            return False
        if c in WHITESPACE:
            return True
        if state in (_VALUE, _VALUE_OR_END):
            if state == _VALUE_OR_END and c == "]":
                return self._close(c)
            return self._start_value(c)
        if state in (_KEY_OR_END, _KEY):
            if state == _KEY_OR_END and c == "}":
                return self._close(c)
            if c != '"':
                return False
            self._state, self._key = _STRING, True
            return True
        if state == _COLON:
            if c != ":":
                return False
            self._state = _VALUE
            return True
        # _AFTER
        if c == ",":
            self._state = _KEY if self._stack[-1] == "{" else _VALUE
            return True
        return self._close(c)

    def _start_value(self, c: str) -> bool:
        if c in "{[":
            if len(self._stack) >= MAX_JSON_DEPTH:
                return self._break()
            self._stack.append(c)
            self._state = _KEY_OR_END if c == "{" else _VALUE_OR_END
        elif c == '"':
            self._state, self._key = _STRING, False
        elif c in _LITERALS:
            self._state, self._rest = _LITERAL, _LITERALS[c][1:]
        elif c == "-" or (c.isascii() and c.isdigit()):
            self._state, self._number = _NUMBER, c
            self._num = _N_MINUS if c == "-" else _N_ZERO if c == "0" else _N_INT
        else:
            return False
        return True

    def _break(self) -> bool:
        self.broken = True
        return False

    def _number_in_bounds(self) -> bool:
        """strict_json's number bounds, checked on every character: an integer part of at most
        MAX_INT_DIGITS digits; a number with a fraction or exponent finite as a double."""
        text = self._number
        if self._num in (_N_ZERO, _N_INT):
            return len(text) - text.startswith("-") <= MAX_INT_DIGITS or self._break()
        if self._num in _NUMBER_ENDS and math.isinf(float(text)):
            return self._break()
        return True

    def _close(self, c: str) -> bool:
        if not self._stack or _CLOSE[self._stack[-1]] != c:
            return False
        self._stack.pop()
        self._end_value()
        return True

    def _end_unicode(self, code: int) -> bool:
        """Lone surrogates are refused (I-JSON; the SDKs' parser rejects them)."""
        low = 0xDC00 <= code <= 0xDFFF
        if low != self._high:        # a waiting high half needs a low one; no other may come
            return False
        self._high = 0xD800 <= code <= 0xDBFF
        self._state = _STRING
        return True

    def _end_string(self) -> None:
        if self._key:
            self._key = False
            self._state = _COLON
        else:
            self._end_value()

    def _end_value(self) -> None:
        self._state = _AFTER if self._stack else _DONE
