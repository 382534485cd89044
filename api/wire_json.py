"""Quart's JSON provider, strict: `jsonify` never writes NaN/Infinity, `request.get_json` reads strict JSON.

`text(obj)` is the one rendering of a JSON answer's body (what `jsonify` sends, and what the shared
routes' ASGI fast path, api.shared.fast, sends as `data(obj)`, the same encoded): compact, sorted keys,
ASCII, a final newline.

A compact body of plain JSON values (dicts with string keys, lists, tuples, strings, ints, bools, None;
no float, no subclass) is written by msgspec, ~2× faster than json's encoder, and kept only where it is
the bytes json writes: ASCII without DEL (json writes `\u007f`; any non-ASCII byte means a character json
escapes). Everything else (floats, whose spelling differs, other types, non-ASCII text, lone surrogates)
is written by json as before (tests/api/test_wire_json.py compares the two on random values).
"""
from __future__ import annotations

from typing import Any

import msgspec
from quart.json.provider import DefaultJSONProvider

from aotx import strict_json


_LEAF = frozenset({str, int, bool, type(None)})
_SORTED = msgspec.json.Encoder(order="sorted")
_AS_BUILT = msgspec.json.Encoder()
_NODES = 500   # values walked at most: bigger answers are written by json


def _plain(obj: Any) -> bool:
    """Whether `obj` holds plain JSON values only (see the module), each of exactly its type, at most
    _NODES of them (so no cycle, and no nesting deep enough for json's recursion limit, gets here)."""
    todo = [obj]
    pop, extend = todo.pop, todo.extend
    for _ in range(_NODES):
        if not todo:
            return True
        value = pop()
        kind = type(value)
        if kind is dict:
            for key in value:
                if type(key) is not str:
                    return False
            extend(value.values())
        elif kind is list or kind is tuple:
            extend(value)
        elif kind not in _LEAF:
            return False
    return not todo


def compact_ascii(obj: Any, sort_keys: bool) -> bytes | None:
    """`obj` as json.dumps(obj, separators=(",", ":"), ensure_ascii=True, sort_keys=sort_keys) writes it, where
    msgspec can write the same bytes (see the module); None where it cannot."""
    if not _plain(obj):
        return None
    try:
        out = (_SORTED if sort_keys else _AS_BUILT).encode(obj)
    except (UnicodeEncodeError, OverflowError, ValueError, TypeError, RecursionError):
        return None   # a lone surrogate (json escapes it), or what msgspec refuses
    return out if out.isascii() and b"\x7f" not in out else None


class StrictJSONProvider(DefaultJSONProvider):
    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs["allow_nan"] = False
        return super().dumps(obj, **kwargs)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return strict_json.loads(s.decode("utf-8") if isinstance(s, (bytes, bytearray)) else s, **kwargs)

    def text(self, obj: Any) -> str:
        """The body `response(obj)` carries (Flask's DefaultJSONProvider.response: indented in debug mode)."""
        if (self.compact is None and self._app.debug) or self.compact is False:
            return f"{self.dumps(obj, indent=2)}\n"
        fast = compact_ascii(obj, self.sort_keys) if self.ensure_ascii else None
        return f"{self.dumps(obj, separators=(',', ':'))}\n" if fast is None else f"{fast.decode('ascii')}\n"

    def data(self, obj: Any) -> bytes:
        """`text(obj)` encoded (UTF-8), without making the str where msgspec writes it."""
        if self.ensure_ascii and not ((self.compact is None and self._app.debug) or self.compact is False):
            fast = compact_ascii(obj, self.sort_keys)
            if fast is not None:
                return fast + b"\n"
        return self.text(obj).encode()

    def response(self, *args: Any, **kwargs: Any):
        return self._app.response_class(self.text(self._prepare_response_obj(args, kwargs)), mimetype=self.mimetype)
