"""Quart's JSON provider, strict: `jsonify` never writes NaN/Infinity, `request.get_json` reads strict JSON."""
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
