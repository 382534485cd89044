"""Quart's JSON provider, strict: `jsonify` never writes NaN/Infinity, `request.get_json` reads strict JSON.

`text(obj)` is the one rendering of a JSON answer's body (what `jsonify` sends, and what the shared
routes' ASGI fast path, api.shared.fast, sends): compact, sorted keys, ASCII, a final newline.
"""
from __future__ import annotations

from typing import Any

from quart.json.provider import DefaultJSONProvider

from aotx import strict_json


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
        return f"{self.dumps(obj, separators=(',', ':'))}\n"

    def response(self, *args: Any, **kwargs: Any):
        return self._app.response_class(self.text(self._prepare_response_obj(args, kwargs)), mimetype=self.mimetype)
